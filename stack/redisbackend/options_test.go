package redisbackend_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/stack/redisbackend"
)

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (zero, negative, NaN, nil, empty): none panics, New and
// NewPaceStore succeed, and each leaves the documented default: keys
// "sluice:{sluice}:…", a 50 ms timeout, a 200 ms probe interval, no local
// fallback, batches of 64, the server's clock (time.Now for a PaceStore).
func TestOptionsNotGiven(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	cases := map[string]redisbackend.Option{
		"nil Option":              nil,
		"WithKeyPrefix(\"\")":     redisbackend.WithKeyPrefix(""),
		"WithHashTag(\"\")":       redisbackend.WithHashTag(""),
		"WithPin(nil)":            redisbackend.WithPin(nil),
		"WithClock(nil)":          redisbackend.WithClock(nil),
		"WithTimeout(0)":          redisbackend.WithTimeout(0),
		"WithTimeout(-1s)":        redisbackend.WithTimeout(-time.Second),
		"WithProbeInterval(0)":    redisbackend.WithProbeInterval(0),
		"WithProbeInterval(-1s)":  redisbackend.WithProbeInterval(-time.Second),
		"WithLocalFallback(0)":    redisbackend.WithLocalFallback(0),
		"WithLocalFallback(-0.5)": redisbackend.WithLocalFallback(-0.5),
		"WithLocalFallback(NaN)":  redisbackend.WithLocalFallback(math.NaN()),
		"WithLocalFallback(-Inf)": redisbackend.WithLocalFallback(math.Inf(-1)),
		"WithMaxBatch(0)":         redisbackend.WithMaxBatch(0),
		"WithMaxBatch(-1)":        redisbackend.WithMaxBatch(-1),
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := redisbackend.New(c, o)
			if err != nil {
				t.Fatal(err)
			}
			if p := b.KeyPrefix(); p != "sluice:{sluice}:" {
				t.Errorf("key prefix %q, want the default sluice:{sluice}:", p)
			}
			timeout, probe, share, batch, server := redisbackend.Settings(b)
			if timeout != 50*time.Millisecond || probe != 200*time.Millisecond || share != 0 || batch != 64 || !server {
				t.Errorf("timeout %v, probe %v, share %v, batch %d, server time %v; want the defaults", timeout, probe, share, batch, server)
			}
			s, err := redisbackend.NewPaceStore(c, o)
			if err != nil {
				t.Fatal(err)
			}
			if k := s.Key("u"); !strings.HasPrefix(k, "sluice:pace:") {
				t.Errorf("PaceStore key %q, want the default prefix", k)
			}
			if timeout, now := redisbackend.PaceStoreSettings(s); timeout != 50*time.Millisecond || !now {
				t.Errorf("PaceStore timeout %v, time.Now %v; want the defaults", timeout, now)
			}
		})
	}
}

// TestOptionsNotGivenKeepEarlier: a "not given" value is not a reset.
func TestOptionsNotGivenKeepEarlier(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	b, err := redisbackend.New(c,
		redisbackend.WithKeyPrefix("app"), redisbackend.WithKeyPrefix(""),
		redisbackend.WithHashTag("fleet"), redisbackend.WithHashTag(""),
		redisbackend.WithClock(time.Now), redisbackend.WithClock(nil),
		redisbackend.WithTimeout(time.Second), redisbackend.WithTimeout(0),
		redisbackend.WithProbeInterval(time.Second), redisbackend.WithProbeInterval(0),
		redisbackend.WithLocalFallback(0.5), redisbackend.WithLocalFallback(0),
		redisbackend.WithMaxBatch(8), redisbackend.WithMaxBatch(0))
	if err != nil {
		t.Fatal(err)
	}
	timeout, probe, share, batch, server := redisbackend.Settings(b)
	if b.KeyPrefix() != "app:{fleet}:" || timeout != time.Second || probe != time.Second || share != 0.5 || batch != 8 || server {
		t.Errorf("prefix %q, timeout %v, probe %v, share %v, batch %d, server time %v; want the earlier options kept",
			b.KeyPrefix(), timeout, probe, share, batch, server)
	}
	// WithPin(nil) after WithSpread keeps the spread layout.
	s, err := redisbackend.New(c, redisbackend.WithSpread(), redisbackend.WithPin(nil))
	if err != nil || s.KeyPrefix() != "sluice:" {
		t.Errorf("WithSpread, then WithPin(nil): %q, %v; want the spread layout", s.KeyPrefix(), err)
	}
}
