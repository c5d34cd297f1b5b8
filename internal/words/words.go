// Package words reads short strings a machine word at a time: the
// little-endian words the bucket Table's short-key digest, the matcher's
// short-value hash and the word-load comparisons of the matcher and the
// stack's name lookups are built from. (A comparison by word loads as a
// function of its own is over the inlining budget, so its callers write
// their switch out.)
package words

// Le64 is the little-endian word of s's first 8 bytes (len(s) ≥ 8). The
// compiler makes it one load.
func Le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// Le32 is the little-endian word of s's first 4 bytes (len(s) ≥ 4).
func Le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}
