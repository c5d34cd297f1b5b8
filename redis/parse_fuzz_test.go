package redis

import (
	"encoding/binary"
	"testing"
)

// FuzzParseOutcome: whatever a (broken or hostile) server replies, decoding
// it never panics, and an accepted reply is consistent with the ops sent.
func FuzzParseOutcome(f *testing.F) {
	enc := func(v ...int64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
		}
		return b
	}
	f.Add(uint8(3), enc(-1, 0, 0, 0, 0, 5, 4, 3))
	f.Add(uint8(3), enc(-1, 5, 4, 3)) // admitted, no shadow op over: the short form
	f.Add(uint8(4), enc(-1, 5, 4, 3, 2))
	f.Add(uint8(3), enc(1, 100000, 0, 0, 1, 0))
	f.Add(uint8(2), enc(1, 100000, 0, 0, 0, 7, 0))
	f.Add(uint8(2), enc(0, 0, 1, 1, 0))
	f.Add(uint8(1), enc(-1, 0, 0, 0, 2, 0, 0, 1))
	f.Fuzz(func(t *testing.T, nops uint8, data []byte) {
		n := int(nops%8) + 1
		v := make([]int64, len(data)/8)
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
		}
		out, err := parseOutcome(v, n)
		if err != nil {
			return
		}
		if out.Denied < -1 || out.Denied >= n || out.RetryAfter < 0 {
			t.Fatalf("accepted %v: %+v", v, out)
		}
		if out.Denied == -1 && len(out.Remaining) != n || out.Denied >= 0 && out.Remaining != nil && len(out.Remaining) != n {
			t.Fatalf("accepted %v with %d remaining for %d ops", v, len(out.Remaining), n)
		}
		for _, i := range out.ShadowDenied {
			if i < 0 || i >= n {
				t.Fatalf("accepted %v: shadow index %d", v, i)
			}
		}
	})
}
