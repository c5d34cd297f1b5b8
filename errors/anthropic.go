package errors

// appendAnthropic appends the Anthropic-compatible throttled body to dst:
//
//	{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":…,"metric":"tokens","retryAfter":60}}
//
// Anthropic's SDKs retry a 429 and wait for the delay in the retry-after-ms
// (or retry-after) header that Response.Write sets.
func appendAnthropic(dst []byte, e *ThrottledError) []byte {
	e = orZero(e)
	dst = append(dst, `{"type":"error","error":{"type":"rate_limit_error","message":"`+Message+`"`...)
	dst = appendThrottleFields(dst, e)
	return append(dst, '}', '}')
}
