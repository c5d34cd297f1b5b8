package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice"
)

// TrustedProxies resolves a request's client address, believing
// X-Forwarded-For only as far as it was written by the proxies named here.
//
// The peer of the connection (Request.RemoteAddr) is the client unless it
// is a trusted proxy; then X-Forwarded-For is read from right to left, each
// trusted hop skipped, and the first address not trusted is the client. An
// entry that is not an IP address stops the walk at the last trusted hop.
// A nil *TrustedProxies trusts nobody and always returns the peer.
type TrustedProxies struct {
	prefixes []netip.Prefix
}

// NewTrustedProxies parses the trusted proxies, each an IP address
// ("10.0.0.1", "::1") or a CIDR prefix ("10.0.0.0/8"). With none it trusts
// nobody.
func NewTrustedProxies(proxies ...string) (*TrustedProxies, error) {
	t := &TrustedProxies{}
	for i, p := range proxies {
		p = strings.TrimSpace(p)
		if strings.Contains(p, "/") {
			pfx, err := netip.ParsePrefix(p)
			if err != nil {
				return nil, fmt.Errorf("httplimit: trusted proxy %d (%q) is not a CIDR prefix: %w", i, p, err)
			}
			t.prefixes = append(t.prefixes, pfx.Masked())
			continue
		}
		a, err := netip.ParseAddr(p)
		if err != nil {
			return nil, fmt.Errorf("httplimit: trusted proxy %d (%q) is not an IP address: %w", i, p, err)
		}
		a = a.Unmap().WithZone("")
		t.prefixes = append(t.prefixes, netip.PrefixFrom(a, a.BitLen()))
	}
	return t, nil
}

func (t *TrustedProxies) trusted(a netip.Addr) bool {
	if t == nil {
		return false
	}
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP returns the client address of r (see TrustedProxies), and false
// when not even the peer address can be parsed.
func (t *TrustedProxies) ClientIP(r *http.Request) (netip.Addr, bool) {
	peer, ok := remoteIP(r)
	if !ok || !t.trusted(peer) {
		return peer, ok
	}
	client := peer
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		hops := values[i]
		for hops != "" {
			var hop string
			if j := strings.LastIndexByte(hops, ','); j >= 0 {
				hop, hops = hops[j+1:], hops[:j]
			} else {
				hop, hops = hops, ""
			}
			a, err := parseHop(hop)
			if err != nil {
				return client, true
			}
			client = a
			if !t.trusted(a) {
				return client, true
			}
		}
	}
	return client, true
}

func parseHop(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return a.Unmap().WithZone(""), err
}

// remoteIP returns the address of the connection's peer, from
// Request.RemoteAddr, ignoring every forwarding header (a nil
// *TrustedProxies' ClientIP).
func remoteIP(r *http.Request) (netip.Addr, bool) {
	a, err := parseHop(r.RemoteAddr)
	return a, err == nil
}

// ClientIPKey returns a KeyFunc that puts the client address (resolved by
// t; nil trusts nobody) under the dimension name. A request whose address
// cannot be parsed gets no such dimension, so limits on it are skipped.
func ClientIPKey(name string, t *TrustedProxies) KeyFunc {
	return func(r *http.Request) (sluice.Keys, error) {
		var k sluice.Keys
		if a, ok := t.ClientIP(r); ok {
			k.Set(name, a.String())
		}
		return k, nil
	}
}
