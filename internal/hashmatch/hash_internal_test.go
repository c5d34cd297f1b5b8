package hashmatch

import (
	"fmt"
	"strings"
	"testing"
)

// Hash's short form reads a value of up to 16 bytes as overlapping words
// and its length: values that differ in any byte or in length must not
// collide for want of being read. Every value of up to two bytes over a
// small alphabet, and one-byte changes at every position of values of 3
// to 17 bytes (across the 16-byte switch to maphash), hash apart.
func TestHashReadsEveryByte(t *testing.T) {
	seen := map[uint64]string{}
	add := func(v string) {
		h := Hash(v)
		if w, dup := seen[h]; dup && w != v {
			t.Fatalf("Hash(%q) == Hash(%q)", v, w)
		}
		seen[h] = v
	}
	alphabet := "\x00\x01ab*\xff"
	add("")
	for _, a := range alphabet {
		add(string(byte(a)))
		for _, b := range alphabet {
			add(string([]byte{byte(a), byte(b)}))
		}
	}
	for n := 3; n <= 17; n++ {
		base := strings.Repeat("x", n)
		add(base)
		for i := range n {
			for _, c := range []byte{0, 'y', 0xff} {
				v := []byte(base)
				v[i] = c
				add(string(v))
			}
		}
	}
	if len(seen) != 508 {
		t.Fatalf("only %d values hashed", len(seen))
	}
}

// A hit is confirmed against the entry's encoding whatever the lengths of
// its values: one-byte lengths (compared without decoding the varint) and
// longer ones; values of a different length, or differing in their first
// or last byte, match nothing, even when they come with the entry's own
// hashes.
func TestMatchConfirmsEveryLength(t *testing.T) {
	var entries [][]string
	for _, n := range []int{1, 3, 4, 7, 8, 12, 16, 17, 126, 127, 128, 129, 300} {
		entries = append(entries, []string{strings.Repeat("a", n), strings.Repeat("b", n)})
	}
	m := New([]string{"k1", "k2"}, entries)
	for i, e := range entries {
		if got, ok := m.Match(e); !ok || got != i {
			t.Errorf("Match(entry %d) = %d, %v", i, got, ok)
		}
		n := len(e[0])
		for _, miss := range [][]string{
			{e[0], strings.Repeat("b", n-1) + "c"},
			{e[0][:n-1] + "c", e[1]},
			{"c" + e[0][1:], e[1]},
			{e[0], "c" + e[1][1:]},
			{e[0] + "a", e[1]},
			{e[0], e[1] + "b"},
			{e[0], e[1][:n-1]},
		} {
			if got, ok := m.Match(miss); ok {
				t.Errorf("Match(%s) = entry %d", fmt.Sprint(len(miss[0]), "+", len(miss[1])), got)
			}
			// With the entry's own hashes (a collision): the hit must be
			// refused by comparing the values.
			if got, ok := m.MatchHashed(miss, []uint64{Hash(e[0]), Hash(e[1])}); ok && got == i {
				t.Errorf("MatchHashed(%s) with entry %d's hashes matched it", fmt.Sprint(len(miss[0]), "+", len(miss[1])), i)
			}
		}
	}
}
