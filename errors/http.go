package errors

// appendHTTPJSON appends the gateway's HTTP throttled body to dst:
//
//	{"error":"Rate limit exceeded","success":false,"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}
func appendHTTPJSON(dst []byte, e *ThrottledError) []byte {
	e = orZero(e)
	dst = append(dst, `{"error":"`+Message+`","success":false`...)
	dst = appendThrottleFields(dst, e)
	return append(dst, '}')
}
