package errors

import (
	"strconv"
	"unicode/utf8"
)

// The renderers write JSON by hand, field by field, so that the bytes match
// the gateway's documented bodies exactly (field order included) and so that
// rendering allocates nothing beyond the destination buffer.

const hex = "0123456789abcdef"

// appendString appends s as a JSON string. Control characters, quotes and
// backslashes are escaped, invalid UTF-8 becomes U+FFFD, and U+2028/U+2029 are
// escaped so the output is also safe inside JavaScript. The result is always
// valid JSON, whatever s holds.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendField appends `"name":` (name is a trusted literal, no escaping).
func appendField(dst []byte, comma bool, name string) []byte {
	if comma {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// appendThrottleFields appends the three fields every body carries:
// "limitKey", "metric" and the wait (see appendWait; written out here, a
// call fewer on every denial).
func appendThrottleFields(dst []byte, e *ThrottledError) []byte {
	dst = appendField(dst, true, "limitKey")
	dst = appendString(dst, e.LimitKey)
	dst = appendField(dst, true, "metric")
	dst = appendString(dst, e.Metric)
	if e.Permanent {
		return append(dst, `,"permanent":true`...)
	}
	dst = appendField(dst, true, "retryAfter")
	return strconv.AppendInt(dst, e.RetryAfterSeconds(), 10)
}

// appendWait appends "metric" and what the client is to wait:
// "retryAfter", whole seconds rounded up, at least 1; or, for a permanent
// denial (no wait helps), "permanent":true instead, so that no body tells
// a client to retry a request that can never succeed.
func appendWait(dst []byte, e *ThrottledError) []byte {
	dst = appendField(dst, true, "metric")
	dst = appendString(dst, e.Metric)
	if e.Permanent {
		return append(dst, `,"permanent":true`...)
	}
	dst = appendField(dst, true, "retryAfter")
	return strconv.AppendInt(dst, e.RetryAfterSeconds(), 10)
}
