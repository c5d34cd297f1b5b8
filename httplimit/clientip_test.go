package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
)

func TestClientIP(t *testing.T) {
	trusted, err := httplimit.NewTrustedProxies("10.0.0.0/8", "192.168.1.1", "::1", "fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		tp     *httplimit.TrustedProxies
		remote string
		xff    []string
		want   string
		wantOK bool
	}{
		{"no trust ignores spoofed header", nil, "203.0.113.9:4000", []string{"1.1.1.1"}, "203.0.113.9", true},
		{"untrusted peer ignores header", trusted, "203.0.113.9:4000", []string{"1.1.1.1"}, "203.0.113.9", true},
		{"trusted peer, one hop", trusted, "10.1.2.3:80", []string{"198.51.100.7"}, "198.51.100.7", true},
		{"client cannot spoof the left", trusted, "10.1.2.3:80", []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7", true},
		{"chain of trusted hops", trusted, "10.1.2.3:80", []string{"198.51.100.7, 192.168.1.1, 10.9.9.9"}, "198.51.100.7", true},
		{"several header lines", trusted, "10.1.2.3:80", []string{"6.6.6.6, 198.51.100.7", "10.0.0.5"}, "198.51.100.7", true},
		{"all trusted: leftmost", trusted, "10.1.2.3:80", []string{"10.0.0.9, 10.0.0.8"}, "10.0.0.9", true},
		{"malformed hop stops at last trusted", trusted, "10.1.2.3:80", []string{"198.51.100.7, garbage, 10.0.0.8"}, "10.0.0.8", true},
		{"no header: peer", trusted, "10.1.2.3:80", nil, "10.1.2.3", true},
		{"hop with port", trusted, "10.1.2.3:80", []string{"198.51.100.7:5555"}, "198.51.100.7", true},
		{"ipv6 peer and hop", trusted, "[::1]:8080", []string{"[2001:db8::1]:443"}, "2001:db8::1", true},
		{"ipv4-mapped peer is trusted", trusted, "[::ffff:10.0.0.1]:80", []string{"198.51.100.7"}, "198.51.100.7", true},
		{"zone dropped", nil, "[fe80::1%eth0]:80", nil, "fe80::1", true},
		{"unparsable peer", trusted, "not-an-address", []string{"198.51.100.7"}, "invalid IP", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tt.remote
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		got, ok := tt.tp.ClientIP(r)
		if got.String() != tt.want || ok != tt.wantOK {
			t.Errorf("%s: got %v %v, want %s %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestNewTrustedProxiesErrors(t *testing.T) {
	for _, in := range []string{"10.0.0.0/33", "not-an-ip", "10.0.0.1:80", ""} {
		_, err := httplimit.NewTrustedProxies("127.0.0.1", in)
		if err == nil || !strings.Contains(err.Error(), "trusted proxy 1") {
			t.Errorf("NewTrustedProxies(%q) error %v, want one naming proxy 1", in, err)
		}
	}
}

func TestClientIPKey(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "198.51.100.7:1234"
	r.Header.Set("X-Forwarded-For", "6.6.6.6")
	k, err := httplimit.ClientIPKey("ip", nil)(r)
	if v, _ := k.Get("ip"); err != nil || v != "198.51.100.7" {
		t.Errorf("ClientIPKey: %v %v", k, err)
	}
	r.RemoteAddr = "@unix"
	k, _ = httplimit.ClientIPKey("ip", nil)(r)
	if _, ok := k.Get("ip"); ok {
		t.Errorf("unparsable peer produced an ip key: %v", k)
	}
}

// FuzzClientIP: any header and peer never panic, and the result is either
// the peer or an address that appears in the header.
func FuzzClientIP(f *testing.F) {
	f.Add("10.1.2.3:80", "198.51.100.7, 10.0.0.1")
	f.Add("[::1]:1", "[2001:db8::1]:443,,, ,garbage")
	f.Add("x", "")
	trusted, _ := httplimit.NewTrustedProxies("10.0.0.0/8", "::1/128")
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		got, ok := trusted.ClientIP(r)
		peer, peerOK := (*httplimit.TrustedProxies)(nil).ClientIP(r) // the peer: nil trusts nobody
		if ok != peerOK {
			t.Fatalf("ok %v but peer ok %v", ok, peerOK)
		}
		if !ok || got == peer {
			return
		}
		found := false
		for _, hop := range strings.Split(xff, ",") {
			hop = strings.TrimSpace(hop)
			if a, err := netip.ParseAddr(strings.Trim(hop, "[]")); err == nil && a.Unmap().WithZone("") == got {
				found = true
			}
			if ap, err := netip.ParseAddrPort(hop); err == nil && ap.Addr().Unmap().WithZone("") == got {
				found = true
			}
		}
		if !found {
			t.Fatalf("client %v is neither the peer %v nor in X-Forwarded-For %q", got, peer, xff)
		}
	})
}
