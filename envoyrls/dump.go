package envoyrls

import (
	"fmt"
	"sort"
	"strings"
)

// String returns the configuration as text, one line per rule in domain
// and path order, in the shape of envoyproxy/ratelimit's /rlconfig:
//
//	edge.remote_address: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false
//
// A unit_multiplier other than 1 is added as unit_multiplier=N, an
// unlimited rule says unlimited, and gateway JSON limits are listed by
// rateLimitId after the YAML rules.
func (c *Config) String() string {
	if c == nil {
		return ""
	}
	var lines [][2]string // path, the rest
	for _, d := range c.Domains() {
		c.domains[d].dump(&lines)
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i][0] < lines[j][0] })
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l[0])
		b.WriteString(": ")
		b.WriteString(l[1])
		b.WriteByte('\n')
	}
	for _, g := range c.gateway {
		fmt.Fprintf(&b, "%s: gateway JSON limit, %d entries, shadow_mode: %t\n", g.rl.RateLimitID, len(g.rl.Entries), g.rl.Shadow)
	}
	return b.String()
}

func (n *node) dump(lines *[][2]string) {
	if n == nil {
		return
	}
	if r := n.rule; r != nil {
		var what string
		if r.Unlimited {
			what = "unlimited"
		} else {
			what = fmt.Sprintf("unit=%s requests_per_unit=%d", strings.ToUpper(string(r.Unit)), r.RequestsPerUnit)
			if r.UnitMultiplier > 1 {
				what += fmt.Sprintf(" unit_multiplier=%d", r.UnitMultiplier)
			}
		}
		*lines = append(*lines, [2]string{r.Path, fmt.Sprintf("%s, shadow_mode: %t, quota_mode: %t", what, r.Shadow, r.QuotaMode)})
	}
	for _, c := range n.exact {
		c.dump(lines)
	}
	for _, p := range n.prefix {
		p.n.dump(lines)
	}
	for _, c := range n.defaults {
		c.dump(lines)
	}
}
