package pace

import (
	"net/http"
	"time"
)

// Upstreams reports how many upstream keys t keeps state for.
func Upstreams(t *Transport) int { return t.ups.len() }

// StoreKey is the key under which t keeps req's upstream in its Store.
func StoreKey(t *Transport, req *http.Request) string { return t.upstreamName(req) }

// WithProbeWait makes the Transport call f whenever a caller is about to
// wait for a cold upstream's probe to answer.
func WithProbeWait(f func()) Option {
	return optionFunc(func(c *config) { c.probeWait = f })
}

// Unexported for v0.2 (the Transport's plumbing), kept reachable from the
// tests of package pace_test.
type (
	Observation = observation
	Usage       = usage
)

const (
	DefaultMaxWait      = defaultMaxWait
	DefaultMaxUpstreams = defaultMaxUpstreams
	DefaultPause        = defaultPauseLen
)

// Observe is observe without a policy cache.
func Observe(now time.Time, h http.Header) Observation { return observe(h, now, nil) }

var (
	ParseRetryAfter = parseRetryAfter
	ParseUsage      = parseUsage
	AWSThrottling   = awsThrottling
)

// StoreLen reports how many upstreams s holds records for.
func StoreLen(s *MemoryStore) int { return s.len() }
