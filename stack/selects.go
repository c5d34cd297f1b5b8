package stack

import (
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
)

// Selects returns the ids (RateLimitID) of the limits in force that apply
// to a request carrying keys, customer limits first, each in configuration
// order; none applies when it returns an empty slice. It takes nothing from
// any bucket and reads no clock: it is for tests and diagnostics, to check
// that the keys a service builds select the limits meant for them.
//
// A limit applies when keys has a value for every one of its dimension
// keys and one of its entries matches those values: exactly, or with "*"
// in trailing positions, as Allow resolves entries. Dimension names are
// matched exactly, so keys named "IP" select no limit whose dimension is
// "ip": Allow skips such a limit without an error (an unresolvable
// dimension is not a fault, as the gateway decides), and Selects is how a
// test finds the misspelling.
//
// Selects rebuilds the configuration on each call (see Config); do not
// call it on the request path.
func (s *Stack) Selects(keys sluice.Keys) []string {
	cfg := s.Config()
	ids := []string{}
	for _, layer := range [][]RateLimit{cfg.RateLimits, cfg.ServiceLimits} {
		for i := range layer {
			if selects(&layer[i], &keys) {
				ids = append(ids, layer[i].RateLimitID)
			}
		}
	}
	return ids
}

// selects reports whether some entry of rl matches keys, the most specific
// first, as entry resolution does.
func selects(rl *RateLimit, keys *sluice.Keys) bool {
	values := make([]string, len(rl.DimensionKeys))
	for i, name := range rl.DimensionKeys {
		v, ok := keys.Get(name)
		if !ok {
			return false // unresolvable dimension: the limit is skipped
		}
		values[i] = v
	}
	set := make(map[string]bool, len(rl.Entries))
	for _, e := range rl.Entries {
		tuple := make([]string, len(rl.DimensionKeys))
		for i, name := range rl.DimensionKeys {
			tuple[i] = e.Dimensions[name]
		}
		set[joinTuple(tuple)] = true
	}
	for wild := 0; wild <= len(values); wild++ {
		try := make([]string, len(values))
		for i := range values {
			if i < len(values)-wild {
				try[i] = values[i]
			} else {
				try[i] = "*"
			}
		}
		if set[joinTuple(try)] {
			return true
		}
	}
	return false
}

// joinTuple joins values length-prefixed, so that no two tuples join alike.
func joinTuple(values []string) string {
	var b strings.Builder
	for _, v := range values {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}
