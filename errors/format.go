package errors

import (
	"net/http"
	"strconv"
)

// Message is the human-readable message every throttled body carries, as the
// gateway writes it.
const Message = "Rate limit exceeded"

// Format selects the protocol shape of a throttled response, which
// Response renders. The zero Format is HTTPJSON.
//
// Every format writes the same three facts — limitKey, metric and
// retryAfter (whole seconds, rounded up, at least 1) — in the field order
// of the gateway's documented bodies, and sets the retry headers clients
// read (see SetHeaders). A permanent denial, which no wait cures, carries
// "permanent":true in place of retryAfter (and x-should-retry: false in
// place of the retry headers): no body tells a client to retry a request
// that can never succeed.
type Format uint8

const (
	// HTTPJSON is the gateway's HTTP body, status 429:
	//	{"error":"Rate limit exceeded","success":false,"limitKey":…,"metric":…,"retryAfter":1}
	HTTPJSON Format = iota
	// JSONRPC is a JSON-RPC 2.0 error response (MCP), status 200 so that
	// JSON-RPC clients read the error object rather than failing on the HTTP
	// status:
	//	{"jsonrpc":"2.0","id":…,"error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":…,"metric":…,"retryAfter":1}}}
	// Response's ID and Code set the id echoed and the code.
	JSONRPC
	// OpenAI is the OpenAI-compatible body, status 429:
	//	{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":…,"metric":…,"retryAfter":60}}
	OpenAI
	// Anthropic is the Anthropic-compatible body, status 429:
	//	{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":…,"metric":…,"retryAfter":60}}
	Anthropic
	// AWS is an AWS JSON-protocol error that AWS SDKs classify as
	// throttling, status 400 and header X-Amzn-ErrorType: ThrottlingException:
	//	{"__type":"ThrottlingException","message":"Rate exceeded","limitKey":…,"metric":…,"retryAfter":1}
	AWS
)

var formatNames = [...]string{"http", "jsonrpc", "openai", "anthropic", "aws"}

// String returns the format's lower-case name ("http", "jsonrpc", "openai",
// "anthropic", "aws").
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// ParseFormat returns the Format named s, as String spells it.
func ParseFormat(s string) (Format, error) {
	for i, n := range formatNames {
		if n == s {
			return Format(i), nil
		}
	}
	return 0, &formatError{s}
}

type formatError struct{ s string }

func (e *formatError) Error() string {
	return "sluice/errors: unknown response format " + strconv.Quote(e.s) + " (want http, jsonrpc, openai, anthropic or aws)"
}

// Status returns the HTTP status the format answers with: 429 for HTTPJSON,
// OpenAI and Anthropic, 400 for AWS (as AWS services send
// ThrottlingException), 200 for JSONRPC. An unknown format answers 429.
func (f Format) Status() int {
	switch f {
	case JSONRPC:
		return http.StatusOK
	case AWS:
		return http.StatusBadRequest
	}
	return http.StatusTooManyRequests
}

// contentType returns the Content-Type of the format's body (Response.Write sets it).
func (f Format) contentType() string {
	if f == AWS {
		return "application/x-amz-json-1.1"
	}
	return "application/json"
}

func writeResponse(w http.ResponseWriter, f Format, body []byte, e *ThrottledError) error {
	h := w.Header()
	SetHeaders(h, e)
	h.Set("Content-Type", f.contentType())
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del("Content-Encoding")
	if f == AWS {
		h.Set("X-Amzn-ErrorType", awsErrorType)
	}
	w.WriteHeader(f.Status())
	_, err := w.Write(body)
	return err
}

var zeroErr ThrottledError

func orZero(e *ThrottledError) *ThrottledError {
	if e == nil {
		return &zeroErr
	}
	return e
}
