package errors

import "net/http"

// AppendHTTPJSON appends the gateway's HTTP throttled body to dst:
//
//	{"error":"Rate limit exceeded","success":false,"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}
func AppendHTTPJSON(dst []byte, e *ThrottledError) []byte {
	e = orZero(e)
	dst = append(dst, `{"error":"`+Message+`","success":false`...)
	dst = appendThrottleFields(dst, e)
	return append(dst, '}')
}

// WriteHTTPJSON writes the complete HTTP throttled response for e: status
// 429, the retry headers of SetHeaders and the HTTPJSON body.
func WriteHTTPJSON(w http.ResponseWriter, e *ThrottledError) error {
	return HTTPJSON.Write(w, e)
}
