package redis

import (
	"strconv"
	"strings"
)

// Key layouts (Backend.layout).
const (
	layoutSingle = iota // one hash tag for every key: "<prefix>:{<tag>}:<bucket>"
	layoutSpread        // a tag per bucket: "<prefix>:{<8 hex>}:<bucket>"
)

// Bucket is a bucket key (stack.Op.Key) taken apart, as a pin function
// (WithPin) sees it.
type Bucket struct {
	// LimitID is the rate limit's id, Metric its metric ("requests",
	// "tokens", "connections"…), RateIndex the rate's index in the entry.
	LimitID, Metric string
	RateIndex       int
	// Entry holds the entry's values, one per dimension of the limit, "*"
	// where the entry matches any value; Values the request's values at
	// those "*" positions, in order (empty for an exact entry).
	Entry, Values []string
}

// Value returns the value of the i-th dimension of the limit for this
// bucket: the entry's value, or the request's value where the entry has
// "*". It returns "" for an index out of range.
func (k Bucket) Value(i int) string {
	if i < 0 || i >= len(k.Entry) {
		return ""
	}
	if k.Entry[i] != "*" {
		return k.Entry[i]
	}
	w := 0
	for _, e := range k.Entry[:i] {
		if e == "*" {
			w++
		}
	}
	if w < len(k.Values) {
		return k.Values[w]
	}
	return ""
}

// parseBucketKey takes apart a key made by a Stack (stack.Op.Key) into the
// Bucket a pin function gets. It reports false for a string that is not one
// (for instance when the limit id or the metric contains '|', which makes
// the key ambiguous).
func parseBucketKey(key string) (Bucket, bool) {
	var k Bucket
	id, rest, ok := strings.Cut(key, "|")
	if !ok {
		return Bucket{}, false
	}
	metric, rest, ok := strings.Cut(rest, "|")
	if !ok {
		return Bucket{}, false
	}
	idx, rest, ok := strings.Cut(rest, "|")
	if !ok {
		return Bucket{}, false
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 || strconv.Itoa(n) != idx {
		return Bucket{}, false
	}
	k.LimitID, k.Metric, k.RateIndex = id, metric, n
	if k.Entry, rest, ok = parseGroup(rest); !ok || !strings.HasPrefix(rest, "|") {
		return Bucket{}, false
	}
	if k.Values, rest, ok = parseGroup(rest[1:]); !ok || rest != "" {
		return Bucket{}, false
	}
	return k, true
}

// parseGroup reads "len:value,len:value…" up to a '|' or the end.
func parseGroup(s string) ([]string, string, bool) {
	var vals []string
	for s != "" && s[0] != '|' {
		if len(vals) > 0 {
			if s[0] != ',' {
				return nil, "", false
			}
			s = s[1:]
		}
		c := strings.IndexByte(s, ':')
		if c <= 0 || c > 10 {
			return nil, "", false
		}
		n, err := strconv.Atoi(s[:c])
		if err != nil || n < 0 || strconv.Itoa(n) != s[:c] || n > len(s)-c-1 {
			return nil, "", false
		}
		vals = append(vals, s[c+1:c+1+n])
		s = s[c+1+n:]
	}
	return vals, s, true
}

// spreadTag returns the hash tag of a bucket in the spread layout: a
// digest of what selects the bucket, its limit and values (not its metric
// nor its rate index, so that the rates of one limit for one caller stay
// in one slot), or of the pin function's answer when it gives one.
func (b *Backend) spreadTag(key string) string {
	if b.pin != nil {
		if k, ok := parseBucketKey(key); ok {
			if p := b.pin(k); p != "" {
				return hexTag(fnv32("\x00pin\x00" + p))
			}
		}
	}
	sel := key
	if id, rest, ok := strings.Cut(key, "|"); ok {
		if _, rest, ok := strings.Cut(rest, "|"); ok {
			if _, rest, ok := strings.Cut(rest, "|"); ok {
				sel = id + "|" + rest
			}
		}
	}
	return hexTag(fnv32(sel))
}

// redisKey returns the Redis key of a bucket key.
func (b *Backend) redisKey(key string) string {
	if b.layout == layoutSingle {
		return b.keyPrefix + key
	}
	return b.prefix + ":{" + b.spreadTag(key) + "}:" + key
}

// Key returns the Redis key that holds the bucket of a bucket key
// (stack.Op.Key), in the backend's layout.
func (b *Backend) Key(bucketKey string) string { return b.redisKey(bucketKey) }

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func hexTag(h uint32) string {
	const digits = "0123456789abcdef"
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = digits[h&15]
		h >>= 4
	}
	return string(b[:])
}

// slot returns the Redis Cluster hash slot of key (CRC16 of its hash tag,
// or of the whole key when it has none, modulo 16384), as CLUSTER KEYSLOT
// computes it.
func slot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) & 16383)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021), the one Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for j := 0; j < 8; j++ {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
