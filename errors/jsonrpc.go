package errors

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// DefaultJSONRPCCode is the JSON-RPC error code of a throttled request, as
// the gateway answers MCP clients. The MCP specification reserves
// -32000..-32099 for implementations; set Response.Code to another if
// -32003 clashes with yours.
const DefaultJSONRPCCode = -32003

// appendJSONRPC appends a JSON-RPC 2.0 error response for e to dst:
//
//	{"jsonrpc":"2.0","id":"request-1","error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":…,"metric":"requests","retryAfter":1}}}
//
// id is the request's id as raw JSON and is echoed unchanged when it is a
// string, a number or null; anything else (absent, an object, an array, a
// boolean, malformed JSON) is written as null, as JSON-RPC 2.0 asks when the
// id cannot be determined. A code of 0 means DefaultJSONRPCCode.
func appendJSONRPC(dst []byte, e *ThrottledError, id []byte, code int) []byte {
	e = orZero(e)
	if code == 0 {
		code = DefaultJSONRPCCode
	}
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, jsonrpcID(id)...)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":"`+Message+`","data":`...)
	dst = appendJSONRPCData(dst, e)
	return append(dst, '}', '}')
}

// appendJSONRPCData appends the "data" member of the JSON-RPC error for e:
//
//	{"limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}
func appendJSONRPCData(dst []byte, e *ThrottledError) []byte {
	e = orZero(e)
	dst = appendField(append(dst, '{'), false, "limitKey")
	dst = appendString(dst, e.LimitKey)
	return append(appendWait(dst, e), '}')
}

var jsonNull = []byte("null")

// jsonrpcID returns id, without surrounding whitespace, when it is a valid
// JSON-RPC id — a JSON string (valid UTF-8), a JSON number or null — and the
// bytes null otherwise. The result is safe to embed in a JSON document.
func jsonrpcID(id []byte) []byte {
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
