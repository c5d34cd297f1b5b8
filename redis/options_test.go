package redis_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack/limitertest"
)

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (zero, negative, NaN, nil, empty): none panics, New and
// NewPaceStore succeed, and each leaves the documented default: keys
// "sluice:{sluice}:…", a 50 ms timeout, a 200 ms probe interval, no local
// fallback, batches of 64, the server's clock (sluice's default clock for a PaceStore).
func TestOptionsNotGiven(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	cases := map[string]sluiceredis.Option{
		"nil Option":              nil,
		"WithKeyPrefix(\"\")":     sluiceredis.WithKeyPrefix(""),
		"WithHashTag(\"\")":       sluiceredis.WithHashTag(""),
		"WithPin(nil)":            sluiceredis.WithPin(nil),
		"WithClock(nil)":          sluiceredis.WithClock(nil),
		"WithTimeout(0)":          sluiceredis.WithTimeout(0),
		"WithTimeout(-1s)":        sluiceredis.WithTimeout(-time.Second),
		"WithProbeInterval(0)":    sluiceredis.WithProbeInterval(0),
		"WithProbeInterval(-1s)":  sluiceredis.WithProbeInterval(-time.Second),
		"WithLocalFallback(0)":    sluiceredis.WithLocalFallback(0),
		"WithLocalFallback(-0.5)": sluiceredis.WithLocalFallback(-0.5),
		"WithLocalFallback(NaN)":  sluiceredis.WithLocalFallback(math.NaN()),
		"WithLocalFallback(-Inf)": sluiceredis.WithLocalFallback(math.Inf(-1)),
		"WithMaxBatch(0)":         sluiceredis.WithMaxBatch(0),
		"WithMaxBatch(-1)":        sluiceredis.WithMaxBatch(-1),
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := sluiceredis.New(c, o)
			if err != nil {
				t.Fatal(err)
			}
			if p := b.KeyPrefix(); p != "sluice:{sluice}:" {
				t.Errorf("key prefix %q, want the default sluice:{sluice}:", p)
			}
			timeout, probe, share, batch, server := sluiceredis.Settings(b)
			if timeout != 50*time.Millisecond || probe != 200*time.Millisecond || share != 0 || batch != 64 || !server {
				t.Errorf("timeout %v, probe %v, share %v, batch %d, server time %v; want the defaults", timeout, probe, share, batch, server)
			}
			s, err := sluiceredis.NewPaceStore(c, o)
			if err != nil {
				t.Fatal(err)
			}
			if k := sluiceredis.PaceStoreKey(s, "u"); !strings.HasPrefix(k, "sluice:pace:") {
				t.Errorf("PaceStore key %q, want the default prefix", k)
			}
			if timeout, now := sluiceredis.PaceStoreSettings(s); timeout != 50*time.Millisecond || !now {
				t.Errorf("PaceStore timeout %v, default clock %v; want the defaults", timeout, now)
			}
		})
	}
}

// TestOptionsNotGivenKeepEarlier: a "not given" value is not a reset.
func TestOptionsNotGivenKeepEarlier(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	b, err := sluiceredis.New(c,
		sluiceredis.WithKeyPrefix("app"), sluiceredis.WithKeyPrefix(""),
		sluiceredis.WithHashTag("fleet"), sluiceredis.WithHashTag(""),
		sluiceredis.WithClock(limitertest.NewClock(limitertest.Start)), sluiceredis.WithClock(nil),
		sluiceredis.WithTimeout(time.Second), sluiceredis.WithTimeout(0),
		sluiceredis.WithProbeInterval(time.Second), sluiceredis.WithProbeInterval(0),
		sluiceredis.WithLocalFallback(0.5), sluiceredis.WithLocalFallback(0),
		sluiceredis.WithMaxBatch(8), sluiceredis.WithMaxBatch(0))
	if err != nil {
		t.Fatal(err)
	}
	timeout, probe, share, batch, server := sluiceredis.Settings(b)
	if b.KeyPrefix() != "app:{fleet}:" || timeout != time.Second || probe != time.Second || share != 0.5 || batch != 8 || server {
		t.Errorf("prefix %q, timeout %v, probe %v, share %v, batch %d, server time %v; want the earlier options kept",
			b.KeyPrefix(), timeout, probe, share, batch, server)
	}
	// WithPin(nil) after WithSpread keeps the spread layout.
	s, err := sluiceredis.New(c, sluiceredis.WithSpread(), sluiceredis.WithPin(nil))
	if err != nil || s.KeyPrefix() != "sluice:" {
		t.Errorf("WithSpread, then WithPin(nil): %q, %v; want the spread layout", s.KeyPrefix(), err)
	}
}
