// Package match resolves a request's dimension values to the most specific
// configured entry of a rate limit.
//
// A rate limit has ordered dimension keys k1..kn and entries, each giving one
// value per key; a value may be "*" in trailing positions. For a request with
// resolved values v1..vn, Match tries (v1..vn), then (v1..vn-1, *), and so on
// down to (*, …, *). The first entry found wins; when none is found the limit
// does not apply to the request.
//
// Lookups allocate nothing: every level of specificity has its own map, keyed
// by the exact values of that level in a collision-free length-prefixed
// encoding built in a stack buffer.
package match

import (
	"fmt"
	"strconv"
	"strings"
)

// Wildcard is the entry value that matches any value of its dimension.
const Wildcard = "*"

// Limits on a rate limit's shape, as the gateway enforces them.
const (
	MaxKeys    = 10
	MaxEntries = 1000
)

// Matcher finds the most specific entry for resolved values. It is immutable
// once built and safe for concurrent use.
type Matcher struct {
	keys []string
	// levels[p] maps the encoding of the first p values to the index of the
	// entry with exactly p leading exact values (and n-p trailing "*").
	// levels[0] is unused: the all-wildcard entry is in all.
	levels []map[string]int32
	all    int32 // index of the all-wildcard entry, or -1
}

// Problem is one thing wrong with a configuration, at a location.
type Problem struct {
	// Path locates the problem, e.g. "rateLimits[2].entries[5].dimensions.toolName".
	Path string
	// Message says what is wrong.
	Message string
}

// String renders the problem as "path: message".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ConfigError lists every problem found while validating a configuration.
type ConfigError struct {
	Problems []Problem
}

// Error lists the problems, one per line after the first.
func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid rate limit configuration: " + e.Problems[0].String()
	}
	var b strings.Builder
	b.WriteString("invalid rate limit configuration: ")
	b.WriteString(strconv.Itoa(len(e.Problems)))
	b.WriteString(" problems:")
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	return b.String()
}

// Add records a problem at path.
func (e *ConfigError) Add(path, format string, args ...any) {
	e.Problems = append(e.Problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Err returns e when it holds problems and nil otherwise.
func (e *ConfigError) Err() error {
	if e == nil || len(e.Problems) == 0 {
		return nil
	}
	return e
}

// Validate checks dimension keys and entries without building a Matcher.
// Problems are appended to errs with paths under prefix (e.g.
// "rateLimits[0]"); entries are reported as prefix+".entries[i]".
func Validate(errs *ConfigError, prefix string, keys []string, entries [][]string) {
	at := func(s string) string {
		if prefix == "" {
			return s
		}
		return prefix + "." + s
	}
	switch {
	case len(keys) == 0:
		errs.Add(at("dimensionKeys"), "at least one dimension key is required")
	case len(keys) > MaxKeys:
		errs.Add(at("dimensionKeys"), "%d dimension keys, at most %d are allowed", len(keys), MaxKeys)
	}
	seenKey := make(map[string]int, len(keys))
	for i, k := range keys {
		p := at("dimensionKeys[" + strconv.Itoa(i) + "]")
		if k == "" {
			errs.Add(p, "empty dimension key")
			continue
		}
		if j, dup := seenKey[k]; dup {
			errs.Add(p, "duplicate dimension key %q (also at index %d)", k, j)
			continue
		}
		seenKey[k] = i
	}
	switch {
	case len(entries) == 0:
		errs.Add(at("entries"), "at least one entry is required")
	case len(entries) > MaxEntries:
		errs.Add(at("entries"), "%d entries, at most %d are allowed", len(entries), MaxEntries)
	}
	seen := make(map[string]int, len(entries))
	for i, e := range entries {
		p := at("entries[" + strconv.Itoa(i) + "]")
		if len(e) != len(keys) {
			errs.Add(p+".dimensions", "has %d values for %d dimension keys", len(e), len(keys))
			continue
		}
		ok := true
		wild, reported := false, false
		for j, v := range e {
			vp := p + ".dimensions"
			if keys[j] != "" {
				vp += "." + keys[j]
			} else {
				vp += "[" + strconv.Itoa(j) + "]"
			}
			switch {
			case v == "":
				errs.Add(vp, "empty value (use %q to match every value)", Wildcard)
				ok = false
			case v == Wildcard:
				wild = true
			case wild && !reported:
				errs.Add(vp, "exact value %q after a %q: a wildcard is allowed only in trailing positions, so this entry can never match", v, Wildcard)
				ok, reported = false, true
			case wild:
				ok = false
			}
		}
		if !ok {
			continue
		}
		enc := string(encode(nil, e))
		if j, dup := seen[enc]; dup {
			errs.Add(p, "duplicate entry %s (same as entries[%d])", strings.Join(e, ","), j)
			continue
		}
		seen[enc] = i
	}
}

// New builds a Matcher for the dimension keys and entries, where entries[i]
// holds one value per key in key order. It reports every problem at once in a
// *ConfigError: no keys or more than MaxKeys, duplicate or empty keys, no
// entries or more than MaxEntries, an entry with the wrong number of values,
// an empty value, "*" before an exact value, duplicate entries.
func New(keys []string, entries [][]string) (*Matcher, error) {
	var errs ConfigError
	Validate(&errs, "", keys, entries)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	m := &Matcher{
		keys:   append([]string(nil), keys...),
		levels: make([]map[string]int32, len(keys)+1),
		all:    -1,
	}
	for i, e := range entries {
		p := ExactPrefix(e)
		if p == 0 {
			m.all = int32(i)
			continue
		}
		if m.levels[p] == nil {
			m.levels[p] = make(map[string]int32)
		}
		var k string
		if p == 1 {
			k = e[0]
		} else {
			k = string(encode(nil, e[:p]))
		}
		m.levels[p][k] = int32(i)
	}
	return m, nil
}

// Keys returns the dimension keys in order. The slice must not be modified.
func (m *Matcher) Keys() []string { return m.keys }

// Match returns the index of the most specific entry for values (one per
// dimension key, in key order) and whether one was found. It allocates
// nothing. Values must have exactly len(Keys()) elements; otherwise no entry
// matches.
func (m *Matcher) Match(values []string) (int, bool) {
	n := len(m.keys)
	if len(values) != n {
		return 0, false
	}
	for p := n; p >= 1; p-- {
		lv := m.levels[p]
		if lv == nil {
			continue
		}
		var (
			i  int32
			ok bool
		)
		if p == 1 {
			i, ok = lv[values[0]]
		} else {
			i, ok = lookupEncoded(lv, values[:p])
		}
		if ok {
			return int(i), true
		}
	}
	if m.all >= 0 {
		return int(m.all), true
	}
	return 0, false
}

// lookupEncoded looks up the encoding of values, built in a stack buffer;
// kept apart so that limits with one dimension never zero the buffer.
func lookupEncoded(lv map[string]int32, values []string) (int32, bool) {
	var buf [128]byte
	i, ok := lv[string(encode(buf[:0], values))]
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

// encode appends a collision-free encoding of values to dst: each value is
// preceded by its length as a uvarint, so ("a,b","c") and ("a","b,c") differ.
func encode(dst []byte, values []string) []byte {
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
