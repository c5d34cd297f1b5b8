package stack

// What one request resolves once and reuses from limit to limit: its
// dimension values, their hashes, and the encoding of the values matched.

import (
	"encoding/binary"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/hashmatch"
)

// matchState carries a request's resolved values, hashes and encoding from
// one multi-key limit to the next (evaluateInto's plan loop), kept out of
// that loop so that it holds fewer live values across calls.
type matchState struct {
	vals      []string // the values of prev's keys
	hashes    []uint64 // hashes[:hashedTo] are those of vals
	prev      *limit   // the last limit whose values are in vals
	hashedTo  int
	encodedTo int // match's enc holds the encoding of vals[:encodedTo]
	ends      [hashmatch.MaxKeys + 1]int
	pre       [hashmatch.MaxKeys + 1]uint64 // pre[p]: prefix hash of vals[:p], p ≤ hashedTo
}

// match resolves l's values (a limit with the same dimension keys as the
// one matched just before reuses them), hashes and encodes them (into enc,
// returned as grown) as deep as l matches, and returns the index of l's
// most specific entry; false when a dimension is missing or no entry
// matches.
func (ms *matchState) match(l *limit, dc *dimCache, keys *sluice.Keys, enc []byte) (int, bool, []byte) {
	vals, hashes := ms.vals, ms.hashes
	if !l.sameDims || ms.prev != l.prev {
		ms.prev, ms.hashedTo, ms.encodedTo = nil, 0, 0
		enc = enc[:0]
		for k, di := range l.dim {
			var v string
			var ok bool
			if bit := uint64(1) << uint(di); dc.resolved&bit != 0 { // resolved already?
				v, ok = dc.val[di], dc.present&bit != 0
			} else {
				v, ok = dc.resolve(keys, di, l.keys[k])
			}
			if !ok {
				return 0, false, enc
			}
			vals[k] = v
		}
	}
	for ; ms.hashedTo < l.depth; ms.hashedTo++ {
		h := ms.hashedTo
		hashes[h] = dc.hashOf(l.dim[h], vals[h])
		ms.pre[h+1] = hashmatch.NextPrefix(ms.pre[h], hashes[h])
		// The encoding too, while it fits: a hit is then confirmed by one
		// comparison, not one per value.
		if ms.encodedTo == h && len(enc)+len(vals[h])+binary.MaxVarintLen64 <= cap(enc) {
			enc = hashmatch.AppendValue(enc, vals[h])
			ms.encodedTo++
			ms.ends[ms.encodedTo] = len(enc)
		}
	}
	ms.prev = l
	if l.depth == 0 {
		return l.all, true, enc // only an all-wildcard entry: nothing to match
	}
	n := len(l.keys)
	if ms.encodedTo >= l.depth {
		i, ok := l.matcher.MatchEncoded(vals[:n], ms.pre[:], enc, ms.ends[:])
		return i, ok, enc
	}
	i, ok := l.matcher.MatchHashed(vals[:n], hashes[:l.depth])
	return i, ok, enc
}

// dimCache resolves each distinct dimension name of a request once and
// hashes its value at most once. Names with an index beyond the buffers are
// resolved and hashed each time.
type dimCache struct {
	val                       []string
	hash                      []uint64
	resolved, present, hashed uint64 // bit i: dimension i looked up, found, hashed
}

// prefill resolves every dimension name of c that the buffers hold, and
// hashes the values that some limit matches on: one tight loop before the
// plan's, instead of a call per limit and key inside it.
func (dc *dimCache) prefill(keys *sluice.Keys, c *compiled) {
	n := min(len(c.dims), len(dc.val), len(dc.hash), 64)
	for di := range n {
		v, ok := keys.Get(c.dims[di])
		if !ok {
			continue
		}
		bit := uint64(1) << uint(di)
		dc.val[di] = v
		dc.present |= bit
		if c.hashDims&bit != 0 {
			dc.hash[di] = hashmatch.Hash(v)
			dc.hashed |= bit
		}
	}
	if n == 64 {
		dc.resolved = ^uint64(0)
	} else {
		dc.resolved = uint64(1)<<uint(n) - 1
	}
}

// resolve looks up dimension di (not prefilled) in keys, caching it when
// the buffers hold it.
func (dc *dimCache) resolve(keys *sluice.Keys, di int32, name string) (string, bool) {
	v, ok := keys.Get(name)
	if int(di) < len(dc.val) {
		dc.resolved |= 1 << di
		if ok {
			dc.present |= 1 << di
			dc.val[di] = v
		}
	}
	return v, ok
}

// hashOf returns hashmatch.Hash(v) for dimension di's value v.
func (dc *dimCache) hashOf(di int32, v string) uint64 {
	if dc.hashed&(uint64(1)<<uint(di)) != 0 { // set only for di < len(hash)
		return dc.hash[di]
	}
	return dc.hashSlow(di, v)
}

func (dc *dimCache) hashSlow(di int32, v string) uint64 {
	h := hashmatch.Hash(v)
	if int(di) < len(dc.hash) {
		dc.hashed |= 1 << di
		dc.hash[di] = h
	}
	return h
}
