package stack

// How buckets and limits are named: the readable keys of denials and
// backends, and the fixed-size keys of per-value buckets.

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/limitkey"
)

// wildcardKey appends the request's values at the entry's "*" positions to a
// bucket key prefix, in bucketkey.Render's length-prefixed form.
func wildcardKey(prefix string, values []string) string {
	n := len(prefix)
	for i, v := range values {
		if i > 0 {
			n++
		}
		n += decimalLen(len(v)) + 1 + len(v)
	}
	// One allocation, of the exact size: the Builder's bytes become the
	// string.
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteString(prefix)
	var num [20]byte
	for i, v := range values {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.Write(strconv.AppendInt(num[:0], int64(len(v)), 10))
		sb.WriteByte(':')
		sb.WriteString(v)
	}
	return sb.String()
}

// decimalLen is the number of decimal digits of n ≥ 0.
func decimalLen(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// limitKey renders "<rateLimitId>/<key>=<value>[,<key>=<value>…]" with the
// request's resolved values, names and values escaped (see the package
// documentation, "Names of limits and buckets"), so that
// ("p,route=q", "r") and ("p", "q,route=r") give different keys while
// plain values render unchanged.
func limitKey(it *item, keys *sluice.Keys) string {
	return string(appendLimitKey(make([]byte, 0, 64), it, keys))
}

func appendLimitKey(b []byte, it *item, keys *sluice.Keys) []byte {
	b = limitkey.AppendEscaped(b, it.rb.lim.id) // unchanged: an id has no separator (Validate)
	b = append(b, limitkey.SepID)
	return appendDims(b, it, keys, true)
}

// appendDims appends the request's values for it's limit, escaped and
// separated by ',', each after its dimension key and '=' when named (a
// limit key) or alone (an Evaluated entry).
func appendDims(b []byte, it *item, keys *sluice.Keys, named bool) []byte {
	for k, name := range it.rb.lim.keys {
		if k > 0 {
			b = append(b, limitkey.SepDim)
		}
		if named {
			b = limitkey.AppendEscaped(b, name)
			b = append(b, limitkey.SepValue)
		}
		v, _ := keys.Get(name)
		b = limitkey.AppendEscaped(b, v)
	}
	return b
}

// evaluatedName renders an Evaluated entry:
// "<rateLimitId>:<metric>:<value>[,<value>…]".
func evaluatedName(it *item, keys *sluice.Keys) string {
	b := limitkey.AppendEscaped(make([]byte, 0, 64), it.rb.lim.id)
	b = append(b, limitkey.SepField)
	b = limitkey.AppendEscaped(b, it.rb.metric)
	b = append(b, limitkey.SepField)
	return string(appendDims(b, it, keys, false))
}

// appendBucketKey1 is appendBucketKey for a single value.
func appendBucketKey1(kb []byte, v string) []byte {
	if len(v) <= rawMax {
		return append(kb, v...)
	}
	return appendBucketKey(kb, []string{v})
}

// digestLen is the length of a digest key; rawMax the longest value used
// as its own key.
const (
	digestLen = 16
	rawMax    = 32
)

// Two independent process-random seeds: a digest key is a keyed 128-bit
// digest, so callers can neither choose colliding values nor learn the
// seeds from decisions.
var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// appendBucketKey appends the key of the bucket that values (the request's
// values at an entry's "*" positions, in order) select, at most rawMax
// bytes whatever the values' length. A single value of up to rawMax bytes is
// its own key (no hashing; most per-caller limits); otherwise the key is a
// 16-byte keyed digest. Each value is hashed whole and the per-value hashes
// are folded in order, so ("a,b", "c") and ("a", "b,c") differ. Two
// different value lists share a bucket only if a 128-bit digest equals
// another digest or a raw value: with random seeds about 2^-128 per pair,
// and even then the two only share one bucket (stricter, never more).
func appendBucketKey(kb []byte, values []string) []byte {
	if len(values) == 1 && len(values[0]) <= rawMax {
		return append(kb, values[0]...)
	}
	var a, b uint64
	for _, v := range values {
		a = fold(a, maphash.String(digestSeeds[0], v))
		b = fold(b, maphash.String(digestSeeds[1], v))
	}
	kb = binary.LittleEndian.AppendUint64(kb, a)
	return binary.LittleEndian.AppendUint64(kb, b)
}

// fold mixes the hash h of the next value into acc, order-dependently.
func fold(acc, h uint64) uint64 {
	acc = (bits.RotateLeft64(acc, 31) ^ h) * 0xBF58476D1CE4E5B9
	return acc ^ acc>>29
}
