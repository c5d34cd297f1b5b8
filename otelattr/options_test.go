package otelattr_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/otelattr"
)

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (nil): none panics, and Wrap records under the Default
// schema, or keeps a schema an earlier option set.
func TestOptionsNotGiven(t *testing.T) {
	for name, c := range map[string]struct {
		opts []otelattr.Option
		key  string
	}{
		"nil Option":                    {[]otelattr.Option{nil}, string(otelattr.KeyDecision)},
		"WithSchema(nil)":               {[]otelattr.Option{otelattr.WithSchema(nil)}, string(otelattr.KeyDecision)},
		"WithSchema(Gateway), then nil": {[]otelattr.Option{otelattr.WithSchema(otelattr.Gateway), otelattr.WithSchema(nil)}, otelattr.GatewayNamespace + ".decision"},
	} {
		t.Run(name, func(t *testing.T) {
			sr, tp := newRecorder()
			ctx, span := tp.Tracer("t").Start(context.Background(), "req")
			if _, err := otelattr.Wrap(sluice.Unlimited, c.opts...).Allow(ctx, sluice.Keys{}); err != nil {
				t.Fatal(err)
			}
			span.End()
			got := attrs(sr.Ended()[0].Attributes())
			if got[c.key] != "allowed" {
				t.Errorf("attributes %v, want %s=allowed", got, c.key)
			}
		})
	}
}

// A nil Limiter is a programming error, caught at construction by a panic
// that names it.
func TestWrapPanicsOnNil(t *testing.T) {
	defer func() {
		if p, _ := recover().(string); !strings.Contains(p, "Limiter l") {
			t.Errorf("panic %q, want one naming the Limiter l", p)
		}
	}()
	otelattr.Wrap(nil)
}
