package errors

import "net/http"

// Response renders a throttled request's error as a complete response: to
// an http.ResponseWriter with Write (headers, status and body), or to bytes
// with Append and Marshal (the body alone). It is the one renderer of the
// package, for every Format.
//
//	d, err := limits.Allow(ctx, keys)
//	…
//	if !d.Allowed {
//		_ = slerrors.Response{Format: slerrors.Anthropic}.Write(w, d.Err())
//		return
//	}
//
// The error is what sluice.Decision.Err returns, or any error with a
// *ThrottledError in its chain; a nil error (an allowed decision) renders
// nothing, and an error without a *ThrottledError still denies: it renders
// as a ThrottledError that names no limit.
//
// The zero Response renders the gateway's HTTP body (HTTPJSON); an unknown
// Format renders as HTTPJSON too. A Response is a small value: build one
// per request, or keep one per format and set ID per request.
type Response struct {
	// Format is the protocol shape of the response.
	Format Format
	// ID is the JSON-RPC request's id as raw JSON (`"request-1"`, `7`),
	// echoed by the JSONRPC format when it is a string (valid UTF-8), a
	// number or null; a nil or invalid ID (an object, an array, a boolean,
	// malformed JSON) is written as null, as JSON-RPC 2.0 asks when the id
	// cannot be determined. Other formats ignore it.
	ID []byte
	// Code is the JSON-RPC error code; 0 means DefaultJSONRPCCode. Other
	// formats ignore it.
	Code int
}

// denial returns the *ThrottledError of err, or false when err is nil (an
// allowed request). A *ThrottledError itself is what sluice.Decision.Err
// returns; Append tests for one before calling denial, a call fewer.
func denial(err error) (*ThrottledError, bool) {
	if err == nil {
		return nil, false
	}
	te, ok := err.(*ThrottledError)
	if !ok {
		te, _ = AsThrottled(err)
	}
	return orZero(te), true
}

// Append appends the throttled body of err to dst and returns the extended
// buffer; for a nil err it returns dst unchanged.
func (r Response) Append(dst []byte, err error) []byte {
	te, denied := err.(*ThrottledError)
	if !denied {
		if te, denied = denial(err); !denied {
			return dst
		}
	}
	return r.appendBody(dst, orZero(te))
}

func (r Response) appendBody(dst []byte, te *ThrottledError) []byte {
	switch r.Format {
	case HTTPJSON:
		return appendHTTPJSON(dst, te)
	case JSONRPC:
		return appendJSONRPC(dst, te, r.ID, r.Code)
	case OpenAI:
		return appendOpenAI(dst, te)
	case Anthropic:
		return appendAnthropic(dst, te)
	case AWS:
		return appendAWS(dst, te)
	}
	return appendHTTPJSON(dst, te)
}

// Marshal returns the throttled body of err, and nil for a nil err.
func (r Response) Marshal(err error) []byte {
	te, denied := denial(err)
	if !denied {
		return nil
	}
	return r.appendBody(make([]byte, 0, 256), te)
}

// Write writes the complete throttled response of err to w: the retry and
// rate-limit headers (SetHeaders), Content-Type, the format's status (see
// Format.Status) and the body of Append. Headers already set on w are kept.
// For a nil err it writes nothing and returns nil; otherwise it returns the
// error from writing the body.
func (r Response) Write(w http.ResponseWriter, err error) error {
	te, denied := denial(err)
	if !denied {
		return nil
	}
	return writeResponse(w, r.Format, r.appendBody(make([]byte, 0, 256), te), te)
}
