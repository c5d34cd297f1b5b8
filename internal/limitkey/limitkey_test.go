package limitkey

import (
	"net/url"
	"strings"
	"testing"
)

func TestAppendEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"":                "",
		"my-target":       "my-target",
		"a,b=c/d:e%f":     "a%2Cb%3Dc%2Fd%3Ae%25f",
		"%2C":             "%252C",
		"ünïcode#|*":      "ünïcode#|*",
		"tenant:1 user:2": "tenant%3A1 user%3A2",
	} {
		if got := string(AppendEscaped([]byte("x"), in)); got != "x"+want {
			t.Errorf("AppendEscaped(%q) = %q, want %q", in, got, "x"+want)
		}
	}
}

// FuzzAppendEscaped checks that an escaped string holds no separator and
// decodes back to its input, so that escaping is injective.
func FuzzAppendEscaped(f *testing.F) {
	for _, s := range []string{"", "a", ",=/:%", "%25", "a%2Cb", "\xff\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := string(AppendEscaped(nil, s))
		if strings.ContainsAny(e, ",=/:") {
			t.Fatalf("AppendEscaped(%q) = %q holds a separator", s, e)
		}
		if got, err := url.PathUnescape(e); err != nil || got != s {
			t.Fatalf("AppendEscaped(%q) = %q decodes to %q, %v", s, e, got, err)
		}
	})
}
