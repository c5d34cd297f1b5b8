// Package bucketkey renders the identity of one bucket of a Stack, the
// stack.Op.Key a Stack gives its Backend. It is shared by package stack and
// by the tests of the backends (the redis module), which compute the keys
// a Stack will use; users see the format only in Redis keys.
package bucketkey

import "strconv"

// Render returns "<rateLimitId>|<metric>|<rate index>|<entry values>|<request values>",
// each value length-prefixed ("9:my-target"), so that no two buckets share a
// key whatever their values contain. Request values are those at the entry's
// "*" positions (empty for an exact entry).
func Render(limitID, metric string, rateIndex int, entry, values []string) string {
	b := make([]byte, 0, 64)
	b = append(b, limitID...)
	b = append(b, '|')
	b = append(b, metric...)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(rateIndex), 10)
	for _, group := range [][]string{entry, values} {
		b = append(b, '|')
		for i, v := range group {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(len(v)), 10)
			b = append(b, ':')
			b = append(b, v...)
		}
	}
	return string(b)
}
