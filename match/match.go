// Package match resolves a request's dimension values to the most specific
// configured entry of a rate limit.
//
// A rate limit has ordered dimension keys k1..kn and entries, each giving one
// value per key; a value may be "*" in trailing positions. For a request with
// resolved values v1..vn, Match tries (v1..vn), then (v1..vn-1, *), and so on
// down to (*, …, *). The first entry found wins; when none is found the limit
// does not apply to the request.
//
// Lookups allocate nothing and build no key: every level of specificity has
// its own map, keyed by a seeded 64-bit hash of the level's values, and a hit
// is confirmed by comparing the values themselves, so a hash collision can
// never select a wrong entry.
package match

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/hashmatch"
)

// Wildcard is the entry value that matches any value of its dimension.
const Wildcard = hashmatch.Wildcard

// Limits on a rate limit's shape, as the gateway enforces them.
const (
	MaxKeys    = hashmatch.MaxKeys
	MaxEntries = hashmatch.MaxEntries
)

// Matcher finds the most specific entry for resolved values. It is immutable
// once built and safe for concurrent use.
type Matcher struct {
	m *hashmatch.Matcher
}

// New builds a Matcher for the dimension keys and entries, where entries[i]
// holds one value per key in key order. It reports every problem at once in a
// *ConfigError: no keys or more than MaxKeys, duplicate or empty keys, no
// entries or more than MaxEntries, an entry with the wrong number of values,
// an empty value, "*" before an exact value, duplicate entries.
func New(keys []string, entries [][]string) (*Matcher, error) {
	var errs ConfigError
	hashmatch.Validate(errs.Add, "", keys, entries)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return &Matcher{m: hashmatch.New(keys, entries)}, nil
}

// Keys returns the dimension keys in order. The slice must not be modified.
func (m *Matcher) Keys() []string { return m.m.Keys() }

// Match returns the index of the most specific entry for values (one per
// dimension key, in key order) and whether one was found. It allocates
// nothing. Values must have exactly len(Keys()) elements; otherwise no entry
// matches.
func (m *Matcher) Match(values []string) (int, bool) { return m.m.Match(values) }

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

// maxProblems is how many problems a ConfigError records; further problems
// are only counted (ConfigError.Omitted), so that a configuration with a
// mistake in every one of its 50,000 entries costs bounded memory.
const maxProblems = 2000

// errorProblems is how many problems ConfigError.Error spells out before
// summarising the rest as a count.
const errorProblems = 20

// ConfigError lists the problems found while validating a configuration.
// Error spells out the first 20 of them and counts the rest; Problems
// holds them programmatically.
type ConfigError struct {
	// Problems holds the first 2,000 problems, in the order they were
	// found (so that a configuration with a mistake in every one of its
	// 50,000 entries costs bounded memory).
	Problems []Problem
	// Omitted counts the problems found after Problems was full.
	Omitted int
}

// Count returns how many problems were found, recorded or not.
func (e *ConfigError) Count() int { return len(e.Problems) + e.Omitted }

// Error renders the problems, one per line after the first, up to 20 of
// them, followed by how many more there are.
func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 && e.Omitted == 0 {
		return "invalid rate limit configuration: " + e.Problems[0].String()
	}
	var b strings.Builder
	b.WriteString("invalid rate limit configuration: ")
	b.WriteString(formatCount(e.Count()))
	b.WriteString(" problems:")
	shown := e.Problems[:min(len(e.Problems), errorProblems)]
	for _, p := range shown {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	if more := e.Count() - len(shown); more > 0 {
		b.WriteString("\n\t… and ")
		b.WriteString(formatCount(more))
		if more == 1 {
			b.WriteString(" more problem")
		} else {
			b.WriteString(" more problems")
		}
	}
	return b.String()
}

// formatCount renders n with thousands separators (49,980).
func formatCount(n int) string {
	s := strconv.Itoa(n)
	if n < 0 || len(s) <= 3 {
		return s
	}
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}

// Add records a problem at path, or only counts it once Problems is full
// (the message is then not even formatted). With Err it is for code that
// validates a configuration of its own holding rate limits (stack and
// envoyrls do), so that its problems and match's come in one ConfigError.
func (e *ConfigError) Add(path, format string, args ...any) {
	if len(e.Problems) >= maxProblems {
		e.Omitted++
		return
	}
	e.Problems = append(e.Problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Err returns e when it holds problems and nil otherwise.
func (e *ConfigError) Err() error {
	if e == nil || e.Count() == 0 {
		return nil
	}
	return e
}
