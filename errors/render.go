package errors

import "net/http"

// Denial is a rate-limit decision that a Response renders. sluice.Decision
// implements it: Err returns nil when the request was allowed, and a
// *ThrottledError describing the denial otherwise.
type Denial interface{ Err() error }

// Response renders a decision as a complete throttled response in one call:
// to an http.ResponseWriter with Write (headers, status and body), or to bytes
// with Append and Marshal (the body alone).
//
//	d, err := limits.Allow(ctx, keys)
//	…
//	if !d.Allowed {
//		_ = slerrors.Response{Format: slerrors.Anthropic}.Write(w, d)
//		return
//	}
//
// The zero Response renders the gateway's HTTP body (HTTPJSON). The bodies are
// byte for byte those of Format.AppendBody, except that JSONRPC echoes ID and
// uses Code. An allowed decision renders nothing. A Response is a small value:
// build one per request, or keep one per format and set ID per request.
type Response struct {
	// Format is the protocol shape of the response.
	Format Format
	// ID is the JSON-RPC request's id as raw JSON (`"request-1"`, `7`),
	// echoed by the JSONRPC format when it is a string, a number or null (see
	// JSONRPCID); a nil or invalid ID is written as null, as JSON-RPC 2.0 asks
	// when the id cannot be determined. Other formats ignore it.
	ID []byte
	// Code is the JSON-RPC error code; 0 means DefaultJSONRPCCode. Other
	// formats ignore it.
	Code int
}

// denial returns the *ThrottledError of d, or nil when d allowed the request.
// A nil d is an allowed request. An error without a *ThrottledError in its
// chain still denies: it renders as a ThrottledError that names no limit.
func denial(d Denial) (*ThrottledError, bool) {
	if d == nil {
		return nil, false
	}
	err := d.Err()
	if err == nil {
		return nil, false
	}
	te, ok := err.(*ThrottledError) // what sluice.Decision.Err returns
	if !ok {
		te, _ = AsThrottled(err)
	}
	return orZero(te), true
}

// Append appends the throttled body of d to dst and returns the extended
// buffer; for an allowed decision it returns dst unchanged.
func (r Response) Append(dst []byte, d Denial) []byte {
	te, denied := denial(d)
	if !denied {
		return dst
	}
	return r.appendBody(dst, te)
}

func (r Response) appendBody(dst []byte, te *ThrottledError) []byte {
	if r.Format == JSONRPC {
		return AppendJSONRPC(dst, te, r.ID, r.Code)
	}
	return r.Format.AppendBody(dst, te)
}

// Marshal returns the throttled body of d, and nil for an allowed decision.
func (r Response) Marshal(d Denial) []byte {
	te, denied := denial(d)
	if !denied {
		return nil
	}
	return r.appendBody(make([]byte, 0, 256), te)
}

// Write writes the complete throttled response of d to w: the retry and
// rate-limit headers (SetHeaders), Content-Type, the format's status (see
// Format.Status) and the body of Append. Headers already set on w are kept.
// For an allowed decision it writes nothing and returns nil; otherwise it
// returns the error from writing the body.
func (r Response) Write(w http.ResponseWriter, d Denial) error {
	te, denied := denial(d)
	if !denied {
		return nil
	}
	return writeResponse(w, r.Format, r.appendBody(make([]byte, 0, 256), te), te)
}
