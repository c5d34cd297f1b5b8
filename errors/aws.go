package errors

const (
	awsErrorType = "ThrottlingException"
	// awsMessage is the message of the AWS-style throttling error, as AWS
	// services write it.
	awsMessage = "Rate exceeded"
)

// appendAWS appends an AWS JSON-protocol throttling error to dst. AWS SDKs
// read the error code from "__type" (or the X-Amzn-ErrorType header that
// Response.Write sets) and treat ThrottlingException as throttling: they back off
// and retry. The sluice fields follow; AWS SDKs ignore them.
//
//	{"__type":"ThrottlingException","message":"Rate exceeded","limitKey":…,"metric":"requests","retryAfter":1}
func appendAWS(dst []byte, e *ThrottledError) []byte {
	e = orZero(e)
	dst = append(dst, `{"__type":"`+awsErrorType+`","message":"`+awsMessage+`"`...)
	dst = appendThrottleFields(dst, e)
	return append(dst, '}')
}
