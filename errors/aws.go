package errors

import "net/http"

const (
	awsErrorType = "ThrottlingException"
	// AWSMessage is the message of the AWS-style throttling error, as AWS
	// services write it.
	AWSMessage = "Rate exceeded"
)

// AppendAWS appends an AWS JSON-protocol throttling error to dst. AWS SDKs
// read the error code from "__type" (or the X-Amzn-ErrorType header that
// WriteAWS sets) and treat ThrottlingException as throttling: they back off
// and retry. The sluice fields follow; AWS SDKs ignore them.
//
//	{"__type":"ThrottlingException","message":"Rate exceeded","limitKey":…,"metric":"requests","retryAfter":1}
func AppendAWS(dst []byte, e *ThrottledError) []byte {
	e = orZero(e)
	dst = append(dst, `{"__type":"`+awsErrorType+`","message":"`+AWSMessage+`"`...)
	dst = appendThrottleFields(dst, e)
	return append(dst, '}')
}

// WriteAWS writes the complete AWS-style throttled response: status 400 (as
// AWS services send ThrottlingException), X-Amzn-ErrorType, Content-Type
// application/x-amz-json-1.1, retry headers and the body.
func WriteAWS(w http.ResponseWriter, e *ThrottledError) error {
	return AWS.Write(w, e)
}
