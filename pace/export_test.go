package pace

import "net/http"

// Upstreams reports how many upstream keys t keeps state for.
func Upstreams(t *Transport) int { return t.ups.len() }

// StoreKey is the key under which t keeps req's upstream in its Store.
func StoreKey(t *Transport, req *http.Request) string { return t.upstreamName(req) }

// WithProbeWait makes the Transport call f whenever a caller is about to
// wait for a cold upstream's probe to answer.
func WithProbeWait(f func()) Option {
	return optionFunc(func(c *config) { c.probeWait = f })
}
