package hashmatch

import (
	"fmt"
	"testing"
)

// A level whose hashes collide falls back to exact encoded keys; matching
// must not change. Collisions of a seeded 64-bit hash cannot be produced on
// purpose, so the test forces the fallback on every level.
func TestCollisionFallbackMatchesTheSame(t *testing.T) {
	keys := []string{"a", "b", "c"}
	var entries [][]string
	for i := 0; i < 20; i++ {
		entries = append(entries,
			[]string{fmt.Sprint("x", i), fmt.Sprint("y", i), fmt.Sprint("z", i)},
			[]string{fmt.Sprint("x", i), fmt.Sprint("y", i), Wildcard},
			[]string{fmt.Sprint("x", i), Wildcard, Wildcard})
	}
	entries = append(entries, []string{Wildcard, Wildcard, Wildcard})
	hashed := New(keys, entries)
	forced := New(keys, entries)
	for p := 1; p <= 3; p++ {
		forced.rehashLevel(p)
	}
	for i := 0; i < 22; i++ {
		for _, v := range [][]string{
			{fmt.Sprint("x", i), fmt.Sprint("y", i), fmt.Sprint("z", i)},
			{fmt.Sprint("x", i), fmt.Sprint("y", i), "other"},
			{fmt.Sprint("x", i), "other", fmt.Sprint("z", i)},
			{"other", fmt.Sprint("y", i), fmt.Sprint("z", i)},
		} {
			a, aok := hashed.Match(v)
			b, bok := forced.Match(v)
			if a != b || aok != bok || !aok {
				t.Fatalf("Match(%q): hashed %d %v, fallback %d %v", v, a, aok, b, bok)
			}
			// Match and MatchHashed (the hashes given) decide alike.
			hs := []uint64{Hash(v[0]), Hash(v[1]), Hash(v[2])}
			for _, m := range []*Matcher{hashed, forced} {
				if c, cok := m.MatchHashed(v, hs); c != a || cok != aok {
					t.Fatalf("MatchHashed(%q) = %d %v, Match %d %v", v, c, cok, a, aok)
				}
			}
			if e := entries[a]; ExactPrefix(e) > 0 && e[0] != v[0] {
				t.Fatalf("Match(%q) = entry %q", v, e)
			}
		}
	}
}

// A hash hit on values that differ from the entry's is rejected: mix is
// not injective on purpose-built hashes, and equality is what decides.
func TestHashHitIsConfirmed(t *testing.T) {
	m := New([]string{"a"}, [][]string{{"x"}})
	// Claim "y" has x's hash: the lookup hits, the comparison refuses.
	if _, ok := m.MatchHashed([]string{"y"}, []uint64{Hash("x")}); ok {
		t.Fatal("a hash hit on different values matched")
	}
	if i, ok := m.MatchHashed([]string{"x"}, []uint64{Hash("x")}); !ok || i != 0 {
		t.Fatalf("MatchHashed(x) = %d, %v", i, ok)
	}
}

// MatchEncoded confirms a hit by the encoding: values that concatenate
// alike but differ do not match.
func TestMatchEncodedConfirmsByEncoding(t *testing.T) {
	m := New([]string{"a", "b", "c"}, [][]string{{"x,y", "z", Wildcard}, {"x", Wildcard, Wildcard}})
	prepare := func(values ...string) ([]uint64, []byte, []int) {
		var enc []byte
		ends := make([]int, len(values)+1)
		pre := make([]uint64, len(values)+1)
		for i, v := range values {
			pre[i+1] = NextPrefix(pre[i], Hash(v))
			enc = AppendValue(enc, v)
			ends[i+1] = len(enc)
		}
		return pre, enc, ends
	}
	for _, c := range []struct {
		values []string
		want   int
		ok     bool
	}{
		{[]string{"x,y", "z", "q"}, 0, true},
		{[]string{"x", "y,z", "q"}, 1, true}, // same bytes, other split: (x, *, *)
		{[]string{"w", "z", "q"}, 0, false},
	} {
		hs, enc, ends := prepare(c.values...)
		i, ok := m.MatchEncoded(c.values, hs, enc, ends)
		if ok != c.ok || (ok && i != c.want) {
			t.Errorf("MatchEncoded(%q) = %d, %v; want %d, %v", c.values, i, ok, c.want, c.ok)
		}
		if j, jok := m.Match(c.values); j != i || jok != ok {
			t.Errorf("MatchEncoded(%q) = %d, %v but Match = %d, %v", c.values, i, ok, j, jok)
		}
	}
	// A forged hash hit is refused by the encoding.
	_, enc, ends := prepare("w", "z", "q")
	forged := []uint64{0, NextPrefix(0, Hash("x,y")), NextPrefix(NextPrefix(0, Hash("x,y")), Hash("z"))}
	if _, ok := m.MatchEncoded([]string{"w", "z", "q"}, forged, enc, ends); ok {
		t.Error("a hash hit with a different encoding matched")
	}
	// MatchHashed: values claiming the hashes of ("x,y", "z") hit their
	// slot and are refused value by value, including values whose bytes
	// run together the same ("x", "y,z").
	for _, v := range [][]string{{"w", "z", "q"}, {"x", "y,z", "q"}, {"x,y", "zz", "q"}, {"x,y", "", "q"}} {
		if i, ok := m.MatchHashed(v, []uint64{Hash("x,y"), Hash("z")}); ok && i == 0 {
			t.Errorf("MatchHashed(%q) with forged hashes matched entry 0", v)
		}
	}
}

// Encodings too large in all for the arena's 32-bit offsets are confirmed
// against their own strings; MatchEncoded must answer the same either way.
func TestMatchEncodedWithoutArenaMatchesTheSame(t *testing.T) {
	keys := []string{"a", "b"}
	var entries [][]string
	for i := 0; i < 30; i++ {
		entries = append(entries,
			[]string{fmt.Sprint("x", i), fmt.Sprint("y", i)},
			[]string{fmt.Sprint("x", i), Wildcard})
	}
	withArena := New(keys, entries)
	without := New(keys, entries)
	without.noArena, without.arena = true, ""
	hits := 0
	for i := 0; i < 32; i++ {
		for _, v := range [][]string{
			{fmt.Sprint("x", i), fmt.Sprint("y", i)},
			{fmt.Sprint("x", i), "other"},
			{"other", fmt.Sprint("y", i)},
		} {
			var pre [MaxKeys + 1]uint64
			var ends [MaxKeys + 1]int
			var enc []byte
			for k, s := range v {
				pre[k+1] = NextPrefix(pre[k], Hash(s))
				enc = AppendValue(enc, s)
				ends[k+1] = len(enc)
			}
			a, aok := withArena.MatchEncoded(v, pre[:], enc, ends[:])
			b, bok := without.MatchEncoded(v, pre[:], enc, ends[:])
			if a != b || aok != bok {
				t.Fatalf("MatchEncoded(%q): with the arena %d %v, without %d %v", v, a, aok, b, bok)
			}
			hs := []uint64{Hash(v[0]), Hash(v[1])}
			c, cok := withArena.MatchHashed(v, hs)
			d, dok := without.MatchHashed(v, hs)
			if c != a || cok != aok || d != a || dok != aok {
				t.Fatalf("MatchHashed(%q): with the arena %d %v, without %d %v; MatchEncoded %d %v", v, c, cok, d, dok, a, aok)
			}
			if aok {
				hits++
			}
		}
	}
	if hits != 60 {
		t.Fatalf("%d hits, want 60 (30 exact, 30 by prefix)", hits)
	}
}
