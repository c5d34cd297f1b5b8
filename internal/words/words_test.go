package words

import (
	"encoding/binary"
	"testing"
)

// Le64 and Le32 read the bytes in little-endian order, as
// encoding/binary does, at every offset of a string.
func TestLittleEndian(t *testing.T) {
	s := "\x01\x02\x03\x04\x05\x06\x07\x08\x09\xfe\xff"
	for i := 0; i+8 <= len(s); i++ {
		if got, want := Le64(s[i:]), binary.LittleEndian.Uint64([]byte(s[i:])); got != want {
			t.Errorf("Le64(s[%d:]) = %#x, want %#x", i, got, want)
		}
	}
	for i := 0; i+4 <= len(s); i++ {
		if got, want := Le32(s[i:]), binary.LittleEndian.Uint32([]byte(s[i:])); got != want {
			t.Errorf("Le32(s[%d:]) = %#x, want %#x", i, got, want)
		}
	}
}
