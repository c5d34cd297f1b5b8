package errors

import (
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// DefaultJSONRPCCode is the JSON-RPC error code of a throttled request, as
// the gateway answers MCP clients. The MCP specification reserves
// -32000..-32099 for implementations; pass another code to AppendJSONRPC if
// -32003 clashes with yours.
const DefaultJSONRPCCode = -32003

// AppendJSONRPC appends a JSON-RPC 2.0 error response for e to dst:
//
//	{"jsonrpc":"2.0","id":"request-1","error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":…,"metric":"requests","retryAfter":1}}}
//
// id is the request's id as raw JSON and is echoed unchanged when it is a
// string, a number or null; anything else (absent, an object, an array, a
// boolean, malformed JSON) is written as null, as JSON-RPC 2.0 asks when the
// id cannot be determined. A code of 0 means DefaultJSONRPCCode.
func AppendJSONRPC(dst []byte, e *ThrottledError, id []byte, code int) []byte {
	e = orZero(e)
	if code == 0 {
		code = DefaultJSONRPCCode
	}
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, JSONRPCID(id)...)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":"`+Message+`","data":`...)
	dst = AppendJSONRPCData(dst, e)
	return append(dst, '}', '}')
}

// AppendJSONRPCData appends the "data" member of the JSON-RPC error for e:
//
//	{"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}
//
// It is what a JSON-RPC library that builds the envelope itself (such as an
// MCP SDK) needs as the error's data.
func AppendJSONRPCData(dst []byte, e *ThrottledError) []byte {
	e = orZero(e)
	dst = appendField(append(dst, '{'), false, "limitKey")
	dst = appendString(dst, e.LimitKey)
	dst = appendField(dst, true, "metric")
	dst = appendString(dst, e.Metric)
	dst = appendField(dst, true, "retryAfter")
	dst = strconv.AppendInt(dst, e.RetryAfterSeconds(), 10)
	return append(dst, '}')
}

// MarshalJSONRPC returns the JSON-RPC 2.0 error response for e (see
// AppendJSONRPC).
func MarshalJSONRPC(e *ThrottledError, id []byte, code int) []byte {
	return AppendJSONRPC(make([]byte, 0, 256), e, id, code)
}

// WriteJSONRPC writes a JSON-RPC 2.0 error response for e over HTTP: the
// retry headers of SetHeaders, status 200 (JSON-RPC clients, MCP's among
// them, read the error object only from a successful HTTP response) and the
// body of AppendJSONRPC.
func WriteJSONRPC(w http.ResponseWriter, e *ThrottledError, id []byte, code int) error {
	return writeResponse(w, JSONRPC, MarshalJSONRPC(e, id, code), e)
}

var jsonNull = []byte("null")

// JSONRPCID returns id, without surrounding whitespace, when it is a valid
// JSON-RPC id — a JSON string (valid UTF-8), a JSON number or null — and the
// bytes null otherwise. The result is safe to embed in a JSON document.
func JSONRPCID(id []byte) []byte {
	id = trimJSONSpace(id)
	if len(id) == 0 {
		return jsonNull
	}
	switch c := id[0]; {
	case c == '"':
		if !utf8.Valid(id) {
			return jsonNull
		}
	case c == '-' || (c >= '0' && c <= '9'):
	case c == 'n':
	default:
		return jsonNull
	}
	if !json.Valid(id) {
		return jsonNull
	}
	return id
}

func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
