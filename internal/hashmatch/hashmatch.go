// Package hashmatch is the engine behind match.Matcher, with the entry
// points that the stack package shares across limits (one hash per value,
// prefix hashes, encodings). It is internal: what users need is in match.
//
// Lookups allocate nothing and build no key: every level of specificity has
// its own map, keyed by a seeded 64-bit hash of the level's values (combined
// from one Hash per value, so a caller matching several limits on the same
// values hashes each value once), and a hit is confirmed by comparing the
// values themselves, so a hash collision can never select a wrong entry.
package hashmatch

import (
	"hash/maphash"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/words"
)

// Wildcard is the entry value that matches any value of its dimension
// (match.Wildcard).
const Wildcard = "*"

// MaxKeys is the most dimension keys a rate limit has (match.MaxKeys).
const MaxKeys = 10

// Matcher finds the most specific entry for resolved values. It is immutable
// once built and safe for concurrent use.
type Matcher struct {
	keys []string
	enc  []string // enc[i]: the encoding of entries[i]'s exact prefix
	// arena holds every enc[i] of a hashed level back to back; a hashSlot
	// gives its entry's offset, so that MatchHashed and MatchEncoded confirm
	// a hit with one load from the slot's line to the bytes (no string
	// header between).
	arena   string
	noArena bool // the encodings are too large in all for 32-bit offsets
	// levels[p] maps the hash of the first p values (prefixHash) to the
	// index of the entry with exactly p leading exact values (and n-p
	// trailing "*"). levels[0] is unused: the all-wildcard entry is in all.
	levels []*hashIndex
	// exact[p] replaces levels[p] in the (astronomically unlikely) case
	// that two entries of level p share a hash: it is keyed by the
	// collision-free length-prefixed encoding of their values instead.
	exact []map[string]int32
	top   int   // the highest level with entries (0: only the all-wildcard one)
	all   int32 // index of the all-wildcard entry, or -1
}

// seed keys every hash of this package: it is random per process, so
// callers cannot choose values that collide.
var seed = maphash.MakeSeed()

// hashKeys key Hash's short-value form, drawn from seed.
var hashKeys = [4]uint64{
	maphash.String(seed, "k0"), maphash.String(seed, "k1"), maphash.String(seed, "k2"), maphash.String(seed, "k3"),
}

// Hash returns the hash of one value that MatchHashed expects.
//
// A value of up to 16 bytes (most dimension values: target and tool names,
// short caller ids) is read as two overlapping little-endian words and its
// length, and hashed by two keyed 64×64→128-bit multiplications (as
// wyhash does): a third of the instructions of a maphash call, with the
// same process-random keying. Longer values go to maphash.
func Hash(v string) uint64 {
	if len(v) > 16 {
		return maphash.String(seed, v)
	}
	return shortHash(v)
}

// shortHash is Hash of a value of up to 16 bytes.
func shortHash(v string) uint64 {
	var a, b uint64
	switch {
	case len(v) >= 8:
		a, b = words.Le64(v), words.Le64(v[len(v)-8:])
	case len(v) >= 4:
		a, b = uint64(words.Le32(v)), uint64(words.Le32(v[len(v)-4:]))
	case len(v) > 0: // 1–3 bytes: first, middle, last (with the length, distinct)
		a = uint64(v[0])<<16 | uint64(v[len(v)>>1])<<8 | uint64(v[len(v)-1])
	}
	hi, lo := bits.Mul64(a^hashKeys[0], b^hashKeys[1])
	hi, lo = bits.Mul64(lo^hashKeys[2]^uint64(len(v)), hi^hashKeys[3])
	return hi ^ lo
}

// mix folds a value's hash h into the running hash of a prefix. The
// rotation and the odd multiplier make it order-dependent: (a, b) and
// (b, a) differ.
func mix(acc, h uint64) uint64 {
	acc = (bits.RotateLeft64(acc, 29) ^ h) * 0x9E3779B97F4A7C15
	return acc ^ acc>>32
}

// prefixHash is the hash of the first len(hashes) values of a tuple. Each
// level has its own map, so prefixes of different lengths never meet.
func prefixHash(hashes []uint64) uint64 {
	var acc uint64
	for _, h := range hashes {
		acc = mix(acc, h)
	}
	return acc
}

// New builds a Matcher for the dimension keys and entries, where entries[i]
// holds one value per key in key order. The caller has validated them
// (Validate reports no problem): New does not check them again.
func New(keys []string, entries [][]string) *Matcher {
	n := len(keys)
	m := &Matcher{
		keys:   append([]string(nil), keys...),
		levels: make([]*hashIndex, n+1),
		exact:  make([]map[string]int32, n+1),
		all:    -1,
	}
	var hs [MaxKeys]uint64
	m.enc = make([]string, len(entries))
	tmp := make([]map[uint64]int32, n+1)
	for i, e := range entries {
		p := ExactPrefix(e)
		if p == 0 {
			m.all = int32(i)
			continue
		}
		m.enc[i] = string(Encode(nil, e[:p]))
		m.top = max(m.top, p)
		if m.exact[p] != nil {
			m.exact[p][m.enc[i]] = int32(i)
			continue
		}
		if tmp[p] == nil {
			tmp[p] = make(map[uint64]int32)
		}
		for k, v := range e[:p] {
			hs[k] = Hash(v)
		}
		h := prefixHash(hs[:p])
		if _, dup := tmp[p][h]; dup {
			// Two entries share a hash: this level is keyed by encodings.
			m.exact[p] = make(map[string]int32, len(tmp[p])+1)
			for _, j := range tmp[p] {
				m.exact[p][m.enc[j]] = j
			}
			m.exact[p][m.enc[i]] = int32(i)
			tmp[p] = nil
			continue
		}
		tmp[p][h] = int32(i)
	}
	var arena []byte
	off := make([]uint32, len(entries)) // by entry index
	size := 0
	for _, lv := range tmp {
		for _, i := range lv {
			size += len(m.enc[i])
		}
	}
	// Offsets are 32-bit: encodings beyond 4 GiB in all (values of
	// hundreds of kilobytes in every entry) keep their own strings, and a
	// hit is confirmed against those (noArena).
	if m.noArena = uint64(size) > math.MaxUint32; !m.noArena {
		arena = make([]byte, 0, size)
		for _, lv := range tmp {
			for _, i := range lv {
				off[i] = uint32(len(arena))
				arena = append(arena, m.enc[i]...)
			}
		}
		m.arena = string(arena)
		for _, lv := range tmp { // the encodings share the arena's memory
			for _, i := range lv {
				m.enc[i] = m.arena[off[i] : off[i]+uint32(len(m.enc[i]))]
			}
		}
	}
	for p, lv := range tmp {
		if lv != nil {
			m.levels[p] = newHashIndex(lv, off)
		}
	}
	return m
}

// rehashLevel moves level p from hashed to exact keys, as a collision
// does (for tests).
func (m *Matcher) rehashLevel(p int) {
	m.exact[p] = make(map[string]int32)
	m.levels[p].each(func(i int32) { m.exact[p][m.enc[i]] = i })
	m.levels[p] = nil
}

// hashIndex is an immutable open-addressed table from a prefix hash to an
// entry index. The hashes are already keyed and uniform, so the table uses
// them as they are (a Go map would hash them again) and probes linearly in
// a power-of-two array at most half full.
type hashIndex struct {
	mask  uint64
	slots []hashSlot
}

type hashSlot struct {
	h   uint64
	i   int32  // entry index + 1; 0: empty
	off uint32 // where the entry's encoding starts in Matcher.arena
}

func newHashIndex(m map[uint64]int32, off []uint32) *hashIndex {
	size := 2
	for size < 2*len(m) {
		size <<= 1
	}
	x := &hashIndex{mask: uint64(size - 1), slots: make([]hashSlot, size)}
	for h, i := range m {
		j := h & x.mask
		for x.slots[j].i != 0 {
			j = (j + 1) & x.mask
		}
		x.slots[j] = hashSlot{h, i + 1, off[i]}
	}
	return x
}

// slot returns the slot of hash h.
func (x *hashIndex) slot(h uint64) (*hashSlot, bool) {
	for j := h & x.mask; ; j = (j + 1) & x.mask {
		s := &x.slots[j]
		if s.i == 0 {
			return nil, false
		}
		if s.h == h {
			return s, true
		}
	}
}

func (x *hashIndex) each(f func(int32)) {
	for _, s := range x.slots {
		if s.i != 0 {
			f(s.i - 1)
		}
	}
}

// Keys returns the dimension keys in order. The slice must not be modified.
func (m *Matcher) Keys() []string { return m.keys }

// All returns the index of the all-wildcard entry, or -1 when there is
// none. When Depth is 0 it is the only entry: Match needs no values.
func (m *Matcher) All() int { return int(m.all) }

// Depth returns how many leading values MatchHashed may read the hashes of:
// the longest exact prefix of any entry. It is 0 when the only entry is the
// all-wildcard one, which matches without hashing anything.
func (m *Matcher) Depth() int { return m.top }

// Match returns the index of the most specific entry for values (one per
// dimension key, in key order) and whether one was found. It allocates
// nothing. Values must have exactly len(Keys()) elements; otherwise no entry
// matches.
func (m *Matcher) Match(values []string) (int, bool) {
	if len(values) != len(m.keys) {
		return 0, false
	}
	var pre [MaxKeys + 1]uint64 // each prefix hash folded once, as the values are hashed
	for k := range m.top {
		pre[k+1] = mix(pre[k], Hash(values[k]))
	}
	return m.matchPrefixes(values, &pre)
}

// MatchHashed is Match with the values' hashes given: hashes[k] must be
// Hash(values[k]) for k < Depth() (further hashes are ignored). Callers
// matching several limits on shared values hash each value once. A hash
// hit is confirmed against the entry's encoding in the arena, value by
// value: the caller builds no encoding, and no entry's strings are
// followed.
func (m *Matcher) MatchHashed(values []string, hashes []uint64) (int, bool) {
	if len(values) != len(m.keys) || len(hashes) < m.top {
		return 0, false
	}
	var pre [MaxKeys + 1]uint64
	for k := range m.top {
		pre[k+1] = mix(pre[k], hashes[k])
	}
	return m.matchPrefixes(values, &pre)
}

// matchPrefixes is Match and MatchHashed given the prefix hashes of values
// (pre[p] of the first p values, for p ≤ Depth()): each level with entries,
// most specific first, then the all-wildcard entry. A hash hit is confirmed
// against the entry's encoding in the arena, value by value.
func (m *Matcher) matchPrefixes(values []string, pre *[MaxKeys + 1]uint64) (int, bool) {
	for p := m.top; p >= 1; p-- {
		if lv := m.levels[p]; lv != nil {
			if s, ok := lv.slot(pre[p]); ok {
				e := m.enc[s.i-1]
				if !m.noArena {
					e = m.arena[s.off:] // the entry's encoding starts here
				}
				if encodes(e, values[:p]) {
					return int(s.i - 1), true
				}
			}
		} else if ex := m.exact[p]; ex != nil {
			if i, ok := lookupEncoded(ex, values[:p]); ok {
				return int(i), true
			}
		}
	}
	if m.all >= 0 {
		return int(m.all), true
	}
	return 0, false
}

// NextPrefix returns the prefix hash of the first p+1 values from prev,
// that of the first p (0 for none), and h, Hash of value p. MatchEncoded
// takes prefix hashes.
func NextPrefix(prev, h uint64) uint64 { return mix(prev, h) }

// MatchEncoded is MatchHashed with work shared across Matchers of the same
// values: pre[p] must be the prefix hash of the first p values (NextPrefix,
// from pre[0] = 0), enc their encoding (AppendValue of each in order), and
// ends[p] the length of the encoding of the first p values, for
// p ≤ Depth(). A hit is confirmed by one comparison of encodings instead of
// one per value.
func (m *Matcher) MatchEncoded(values []string, pre []uint64, enc []byte, ends []int) (int, bool) {
	if len(values) != len(m.keys) || len(pre) <= m.top || len(ends) <= m.top {
		return 0, false
	}
	for p := m.top; p >= 1; p-- {
		if lv := m.levels[p]; lv != nil {
			if s, ok := lv.slot(pre[p]); ok {
				// The stored encoding holds exactly p self-delimiting values:
				// equal on the request's ends[p] bytes means equal.
				if m.noArena {
					if m.enc[s.i-1] == string(enc[:ends[p]]) {
						return int(s.i - 1), true
					}
				} else if e := int(s.off) + ends[p]; e <= len(m.arena) && m.arena[s.off:e] == string(enc[:ends[p]]) {
					return int(s.i - 1), true
				}
			}
		} else if ex := m.exact[p]; ex != nil {
			if i, ok := ex[string(enc[:ends[p]])]; ok {
				return int(i), true
			}
		}
	}
	if m.all >= 0 {
		return int(m.all), true
	}
	return 0, false
}

// encodes reports whether e starts with the encoding of values (see
// encode).
func encodes(e string, values []string) bool {
	for _, v := range values {
		// A value under 128 bytes has a one-byte length: compared without
		// decoding a varint.
		if n := len(v); n < 0x80 && len(e) > n && e[0] == byte(n) {
			w := e[1 : 1+n]
			// A value of 4 to 16 bytes by two overlapping word loads each
			// (== calls memequal, saving this loop's registers around it).
			switch {
			case n >= 8 && n <= 16:
				if words.Le64(w) != words.Le64(v) || words.Le64(w[n-8:]) != words.Le64(v[n-8:]) {
					return false
				}
			case n >= 4 && n < 8:
				if words.Le32(w) != words.Le32(v) || words.Le32(w[n-4:]) != words.Le32(v[n-4:]) {
					return false
				}
			default:
				if w != v {
					return false
				}
			}
			e = e[1+n:]
			continue
		}
		n, shift := uint64(0), uint(0)
		for {
			if len(e) == 0 || shift > 63 {
				return false
			}
			b := e[0]
			e = e[1:]
			n |= uint64(b&0x7f) << shift
			if b < 0x80 {
				break
			}
			shift += 7
		}
		if n != uint64(len(v)) || uint64(len(e)) < n || e[:n] != v {
			return false
		}
		e = e[n:]
	}
	return true
}

// lookupEncoded looks up the encoding of values, built in a stack buffer
// (the fallback after a hash collision).
func lookupEncoded(lv map[string]int32, values []string) (int32, bool) {
	var buf [128]byte
	i, ok := lv[string(Encode(buf[:0], values))]
	return i, ok
}

// ExactPrefix returns how many leading values of an entry are exact (not "*").
func ExactPrefix(entry []string) int {
	for i, v := range entry {
		if v == Wildcard {
			return i
		}
	}
	return len(entry)
}

// Encode appends a collision-free encoding of values to dst: each value is
// preceded by its length as a uvarint, so ("a,b","c") and ("a","b,c") differ.
func Encode(dst []byte, values []string) []byte {
	for _, v := range values {
		dst = AppendValue(dst, v)
	}
	return dst
}

// AppendValue appends v to dst in the length-prefixed encoding Match uses for
// its keys. Engines use it to build per-value bucket keys without collisions.
func AppendValue(dst []byte, v string) []byte {
	n := uint64(len(v))
	for n >= 0x80 {
		dst = append(dst, byte(n)|0x80)
		n >>= 7
	}
	dst = append(dst, byte(n))
	return append(dst, v...)
}

// MaxEntries is how many entries a rate limit may have, as the gateway
// enforces it.
const MaxEntries = 1000

// Validate checks dimension keys and entries without building a Matcher
// (match.New and stack's configuration check call it; match documents the
// rules). Each problem goes to add (match.ConfigError.Add) with a path
// under prefix (e.g. "rateLimits[0]"); entries are reported as
// prefix+".entries[i]".
func Validate(add func(path, format string, args ...any), prefix string, keys []string, entries [][]string) {
	at := func(s string) string {
		if prefix == "" {
			return s
		}
		return prefix + "." + s
	}
	switch {
	case len(keys) == 0:
		add(at("dimensionKeys"), "at least one dimension key is required")
	case len(keys) > MaxKeys:
		add(at("dimensionKeys"), "%d dimension keys, at most %d are allowed", len(keys), MaxKeys)
	}
	seenKey := make(map[string]int, len(keys))
	for i, k := range keys {
		p := at("dimensionKeys[" + strconv.Itoa(i) + "]")
		if k == "" {
			add(p, "empty dimension key")
			continue
		}
		if j, dup := seenKey[k]; dup {
			add(p, "duplicate dimension key %q (also at index %d)", k, j)
			continue
		}
		seenKey[k] = i
	}
	switch {
	case len(entries) == 0:
		add(at("entries"), "at least one entry is required")
	case len(entries) > MaxEntries:
		add(at("entries"), "%d entries, at most %d are allowed", len(entries), MaxEntries)
	}
	seen := make(map[string]int, len(entries))
	var buf [256]byte
	for i, e := range entries {
		// Paths are built only for problems.
		p := func() string { return at("entries[" + strconv.Itoa(i) + "]") }
		if len(e) != len(keys) {
			add(p()+".dimensions", "has %d values for %d dimension keys", len(e), len(keys))
			continue
		}
		vp := func(j int) string {
			if keys[j] != "" {
				return p() + ".dimensions." + keys[j]
			}
			return p() + ".dimensions[" + strconv.Itoa(j) + "]"
		}
		ok := true
		wild, reported := false, false
		for j, v := range e {
			switch {
			case v == "":
				add(vp(j), "empty value (use %q to match every value)", Wildcard)
				ok = false
			case v == Wildcard:
				wild = true
			case wild && !reported:
				add(vp(j), "exact value %q after a %q: a wildcard is allowed only in trailing positions, so this entry can never match", v, Wildcard)
				ok, reported = false, true
			case wild:
				ok = false
			}
		}
		if !ok {
			continue
		}
		enc := Encode(buf[:0], e)
		if j, dup := seen[string(enc)]; dup {
			add(p(), "duplicate entry %s (same as entries[%d])", strings.Join(e, ","), j)
			continue
		}
		seen[string(enc)] = i
	}
}
