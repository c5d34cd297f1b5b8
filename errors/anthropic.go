package errors

import "net/http"

// AppendAnthropic appends the Anthropic-compatible throttled body to dst:
//
//	{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":…,"metric":"tokens","retryAfter":60}}
//
// Anthropic's SDKs retry a 429 and wait for the delay in the retry-after-ms
// (or retry-after) header that WriteAnthropic sets.
func AppendAnthropic(dst []byte, e *ThrottledError) []byte {
	e = orZero(e)
	dst = append(dst, `{"type":"error","error":{"type":"rate_limit_error","message":"`+Message+`"`...)
	dst = appendThrottleFields(dst, e)
	return append(dst, '}', '}')
}

// WriteAnthropic writes the complete Anthropic-compatible throttled
// response: status 429, retry headers and the body.
func WriteAnthropic(w http.ResponseWriter, e *ThrottledError) error {
	return Anthropic.Write(w, e)
}
