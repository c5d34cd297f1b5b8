package errors

// appendOpenAI appends the OpenAI-compatible throttled body to dst. The code
// is the string "429", as the gateway writes it:
//
//	{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":…,"metric":"tokens","retryAfter":60}}
//
// OpenAI's SDKs retry a 429 and wait for the delay in the retry-after-ms (or
// retry-after) header that Response.Write sets.
func appendOpenAI(dst []byte, e *ThrottledError) []byte {
	e = orZero(e)
	dst = append(dst, `{"error":{"message":"`+Message+`","type":"rate_limit_error","code":"429"`...)
	dst = appendThrottleFields(dst, e)
	return append(dst, '}', '}')
}
