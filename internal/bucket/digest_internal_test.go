package bucket

import (
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"testing"
)

// unmix inverts mix: each xor-shift by 33 of a 64-bit word is undone by
// itself (the shifted-in half is untouched), each multiplication by the
// constant's inverse modulo 2⁶⁴.
func unmix(x uint64) uint64 {
	x ^= x >> 33
	x *= inverse(0xc4ceb9fe1a85ec53)
	x ^= x >> 33
	x *= inverse(0xff51afd7ed558ccd)
	x ^= x >> 33
	return x
}

// inverse is the inverse of odd c modulo 2⁶⁴ (Newton's iteration).
func inverse(c uint64) uint64 {
	x := c // right to 3 bits for odd c
	for range 5 {
		x *= 2 - c*x
	}
	return x
}

// The short digest is a bijection: from a digest and the Table's keys the
// word it came from is recovered, for random words and for edge words.
func TestShortDigestIsInvertible(t *testing.T) {
	tab := NewTable(1, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	words := [][2]uint64{{0, 0}, {0, 1}, {1, 0}, {^uint64(0), ^uint64(0)}, {0, 15 << 56}}
	for range 100_000 {
		words = append(words, [2]uint64{rng.Uint64(), rng.Uint64()})
	}
	for _, w := range words {
		d := tab.short(w[0], w[1])
		if d.hi|d.lo == 0 {
			continue // the empty slot's mark, moved by nonzero
		}
		x := d.hi ^ mix(d.lo^tab.k[2])
		a := unmix(x) ^ tab.k[0]
		b := unmix(d.lo-x) ^ tab.k[1]
		if a != w[0] || b != w[1] {
			t.Fatalf("short(%#x, %#x) = %#x, which inverts to (%#x, %#x)", w[0], w[1], d, a, b)
		}
	}
}

// Distinct short keys never share a digest: every key of up to two bytes,
// and random keys of every short length, including ones that differ only
// by trailing zero bytes (the length tells them apart). The string and
// byte forms agree for every key, short or long.
func TestShortKeysNeverCollide(t *testing.T) {
	tab := NewTable(1, 1)
	seen := map[digest]string{}
	add := func(k string) {
		d := tab.digestString(k)
		if e := tab.digestBytes([]byte(k)); e != d {
			t.Fatalf("key %q: digestString %#x, digestBytes %#x", k, d, e)
		}
		if len(k) > shortKey {
			return
		}
		if o, dup := seen[d]; dup && o != k {
			t.Fatalf("keys %q and %q share the digest %#x", o, k, d)
		}
		seen[d] = k
	}
	add("")
	for i := range 256 {
		add(string([]byte{byte(i)}))
		for j := range 256 {
			add(string([]byte{byte(i), byte(j)}))
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 3; n <= shortKey+3; n++ {
		for range 5_000 {
			k := make([]byte, n)
			for i := range k {
				k[i] = byte(rng.UintN(4)) // few symbols: many near neighbours
			}
			add(string(k))
		}
	}
	for _, k := range []string{"a", "a\x00", "a\x00\x00\x00\x00\x00\x00", "a\x00\x00\x00\x00\x00\x00\x00", "abcdefgh", "abcdefgh\x00", "abcdefghijklmno", "abcdefghijklmn\x00"} {
		add(k)
	}
	if want := 1 + 256 + 65536; len(seen) < want {
		t.Fatalf("%d distinct digests, want at least %d", len(seen), want)
	}
}

// Keys that differ in a few characters spread evenly over the shards (the
// digest's low half) and the home slots (its high half): of 100,000
// "caller-N" keys no shard of 16 gets more than 10% above or below its
// share, and no range of 1,024 home ranges more than half again or less
// than half its share.
func TestShortDigestsSpread(t *testing.T) {
	tab := NewTable(1, 1)
	const n = 100_000
	var shards [16]int
	var homes [1024]int
	for i := range n {
		d := tab.digestString("caller-" + strconv.Itoa(i))
		shards[d.lo&15]++
		homes[home(d.hi, len(homes))]++
	}
	for s, c := range shards {
		if c > n/16*11/10 || c < n/16*9/10 {
			t.Fatalf("shard %d holds %d of %d keys (want %d ± 10%%): %v", s, c, n, n/16, shards)
		}
	}
	// The homes are judged together, by Pearson's chi-square over the
	// 1,024 ranges, not range by range: with the Table's random seeds the
	// fullest of 1,024 ranges lies 3–5 standard deviations above the mean
	// by chance alone (a per-range bound of 1.5 × the mean failed about one
	// run in 300). For uniform homes the statistic has mean 1,023 and
	// standard deviation 45; 1,400 is 8 standard deviations up, while homes
	// drawn from too few values (say the first 8 bytes alone) read in the
	// tens of thousands.
	mean := float64(n) / float64(len(homes))
	chi2 := 0.0
	for _, c := range homes {
		d := float64(c) - mean
		chi2 += d * d / mean
	}
	if chi2 > 1400 {
		t.Fatalf("homes spread unevenly: chi-square %.0f over %d ranges (uniform: 1023 ± 45)", chi2, len(homes))
	}
}

// FuzzDigest: the string and byte forms agree, and two distinct short keys
// have distinct digests.
func FuzzDigest(f *testing.F) {
	tab := NewTable(1, 1)
	f.Add("caller-1", "caller-2")
	f.Add("a", "a\x00")
	f.Add("", "\x00")
	f.Add("abcdefghijklmno", "abcdefghijklmnop")
	f.Fuzz(func(t *testing.T, x, y string) {
		dx, dy := tab.digestString(x), tab.digestString(y)
		if dx != tab.digestBytes([]byte(x)) || dy != tab.digestBytes([]byte(y)) {
			t.Fatalf("string and byte digests differ for %q or %q", x, y)
		}
		if x != y && len(x) <= shortKey && len(y) <= shortKey && dx == dy {
			t.Fatalf("short keys %q and %q share the digest %#x", x, y, dx)
		}
	})
}

// BenchmarkDigest: a 12-byte key's digest by the short bijection against
// the two maphash passes it took before (and a longer key still takes),
// alternated in rounds:
//
//	go test ./bucket -run '^$' -bench Digest -benchtime 2000000x
func BenchmarkDigest(b *testing.B) {
	tab := NewTable(1, 1)
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "caller-" + strconv.Itoa(i*7+10013)
	}
	var sink digest
	for range 5 {
		b.Run("short", func(b *testing.B) {
			i := 0
			for b.Loop() {
				sink = tab.digestString(keys[i&1023])
				i++
			}
		})
		b.Run("maphash2", func(b *testing.B) {
			i := 0
			for b.Loop() {
				k := keys[i&1023]
				sink = nonzero(digest{maphash.String(tab.seed1, k), maphash.String(tab.seed2, k)})
				i++
			}
		})
	}
	_ = sink
}
