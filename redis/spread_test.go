package redis_test

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/bucketkey"
	sluiceredis "github.com/sluicehq/sluice/redis"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/stack/limitertest"
)

func TestSpreadOptions(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	if _, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithHashTag("x")); err == nil {
		t.Error("WithSpread with WithHashTag: no error")
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	if _, err := sluiceredis.New(ring, sluiceredis.WithSpread()); err == nil || !strings.Contains(err.Error(), "Ring") {
		t.Errorf("WithSpread on a Ring: %v, want an error naming the Ring", err)
	}
	if b, err := sluiceredis.New(client, sluiceredis.WithPin(nil)); err != nil || b.KeyPrefix() != "sluice:{sluice}:" {
		t.Errorf("WithPin(nil): %v, %v; want the default layout (one hash tag)", b.KeyPrefix(), err)
	}
	// The default layout keeps one tag (the keys of earlier versions).
	b, _ := sluiceredis.New(client)
	if k := b.Key("rl|requests|0|1:*|1:c"); k != "sluice:{sluice}:rl|requests|0|1:*|1:c" {
		t.Errorf("default key %q", k)
	}
	s, _ := sluiceredis.New(client, sluiceredis.WithSpread())
	k1 := s.Key(bucketkey.Render("rl", "requests", 0, []string{"*"}, []string{"c"}))
	k2 := s.Key(bucketkey.Render("rl", "requests", 1, []string{"*"}, []string{"c"}))
	k3 := s.Key(bucketkey.Render("rl", "tokens", 0, []string{"*"}, []string{"c"}))
	k4 := s.Key(bucketkey.Render("rl", "requests", 0, []string{"*"}, []string{"d"}))
	if !strings.HasPrefix(k1, "sluice:{") || sluiceredis.Slot(k1) != sluiceredis.Slot(k2) || sluiceredis.Slot(k1) != sluiceredis.Slot(k3) {
		t.Errorf("the rates and metrics of one limit and caller should share a slot: %q %q %q", k1, k2, k3)
	}
	if sluiceredis.Slot(k1) == sluiceredis.Slot(k4) {
		t.Errorf("two callers share slot %d: %q %q", sluiceredis.Slot(k1), k1, k4)
	}
	// Pinned by the caller: two limits, one slot per caller.
	p, _ := sluiceredis.New(client, sluiceredis.WithPin(func(k sluiceredis.Bucket) string {
		if k.LimitID == "per-caller" || k.LimitID == "per-caller-tool" {
			return k.Value(0)
		}
		return ""
	}))
	a := p.Key(bucketkey.Render("per-caller", "requests", 0, []string{"*"}, []string{"alice"}))
	bb := p.Key(bucketkey.Render("per-caller-tool", "requests", 0, []string{"*", "search"}, []string{"alice"}))
	c := p.Key(bucketkey.Render("per-caller-tool", "requests", 0, []string{"*", "*"}, []string{"alice", "fetch"}))
	o := p.Key(bucketkey.Render("per-target", "requests", 0, []string{"*"}, []string{"alice"}))
	if sluiceredis.Slot(a) != sluiceredis.Slot(bb) || sluiceredis.Slot(a) != sluiceredis.Slot(c) {
		t.Errorf("pinned keys in different slots: %q %q %q", a, bb, c)
	}
	if sluiceredis.Slot(a) == sluiceredis.Slot(o) {
		t.Errorf("an unpinned limit shares the pinned slot: %q %q", a, o)
	}
}

func TestParseBucketKey(t *testing.T) {
	k := bucketkey.Render("per-tool", "requests", 2, []string{"*", "x,y|z"}, []string{"1:2"})
	got, ok := sluiceredis.ParseBucketKey(k)
	want := sluiceredis.Bucket{LimitID: "per-tool", Metric: "requests", RateIndex: 2, Entry: []string{"*", "x,y|z"}, Values: []string{"1:2"}}
	if !ok || got.LimitID != want.LimitID || got.Metric != want.Metric || got.RateIndex != 2 ||
		!slices.Equal(got.Entry, want.Entry) || !slices.Equal(got.Values, want.Values) {
		t.Fatalf("ParseBucketKey(%q) = %+v, %v", k, got, ok)
	}
	if got.Value(0) != "1:2" || got.Value(1) != "x,y|z" || got.Value(2) != "" {
		t.Errorf("Value: %q %q %q", got.Value(0), got.Value(1), got.Value(2))
	}
	for _, bad := range []string{"", "a", "a|b", "a|b|c|", "a|b|01||", "a|b|0|1:x", "a|b|0|2:x|", "a|b|0|1:x|1:y|", "a|b|0|1:x1:y|"} {
		if _, ok := sluiceredis.ParseBucketKey(bad); ok {
			t.Errorf("ParseBucketKey(%q) accepted", bad)
		}
	}
}

// FuzzParseBucketKey: never panics, and a key BucketKey made is read back.
func FuzzParseBucketKey(f *testing.F) {
	f.Add("id", "requests", 0, "a", "b", "c")
	f.Add("x", "tokens", 3, "*", "", "1:2,3")
	f.Fuzz(func(t *testing.T, id, metric string, idx int, e1, e2, v string) {
		_, _ = sluiceredis.ParseBucketKey(id + "|" + metric + "|" + e1 + e2 + v)
		if strings.Contains(id, "|") || strings.Contains(metric, "|") || idx < 0 {
			return
		}
		k := bucketkey.Render(id, metric, idx, []string{e1, e2}, []string{v})
		got, ok := sluiceredis.ParseBucketKey(k)
		if !ok || got.LimitID != id || got.Metric != metric || got.RateIndex != idx ||
			!slices.Equal(got.Entry, []string{e1, e2}) || !slices.Equal(got.Values, []string{v}) {
			t.Fatalf("ParseBucketKey(%q) = %+v, %v", k, got, ok)
		}
	})
}

// TestSpreadDistribution: the per-caller buckets of 100,000 callers fall
// on each of three masters (the slot ranges redis-cli --cluster create
// assigns) within ±10% of a third, from slots computed locally (Slot is
// checked against CLUSTER KEYSLOT in TestClusterSpread).
func TestSpreadDistribution(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	b, err := sluiceredis.New(client, sluiceredis.WithSpread())
	if err != nil {
		t.Fatal(err)
	}
	var per [3]int
	const n = 100000
	for i := 0; i < n; i++ {
		k := b.Key(bucketkey.Render("per-caller", "requests", 0, []string{"*"}, []string{"caller-" + strconv.Itoa(i)}))
		s := sluiceredis.Slot(k)
		switch {
		case s <= 5460:
			per[0]++
		case s <= 10922:
			per[1]++
		default:
			per[2]++
		}
	}
	for m, c := range per {
		if dev := float64(c)/(n/3.0) - 1; math.Abs(dev) > 0.10 {
			t.Errorf("master %d holds %d of %d buckets (%+.1f%% from a third)", m, c, n, 100*dev)
		}
	}
	t.Logf("100k callers over 3 masters: %v", per)
}

// On one server the spread layout decides as the default one: batching
// works, every bucket has its own tag.
func TestSpreadSingleServer(t *testing.T) {
	srv := startRedis(t)
	client, _ := newClient(t, srv.Addr)
	clock := limitertest.NewClock(limitertest.Start)
	b, err := sluiceredis.New(client, sluiceredis.WithSpread(), sluiceredis.WithClock(clock),
		sluiceredis.WithKeyPrefix(uniquePrefix("ss")), sluiceredis.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.New(threeLimits, stack.WithClock(clock), stack.WithBackend(b), stack.WithFailClosed())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allowed := 0
	for i := 0; i < 150; i++ {
		d, err := s.Allow(ctx, threeKeys)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 100 {
		t.Errorf("allowed %d of 150 against the 100/s tool limit", allowed)
	}
	keys, err := client.Keys(ctx, b.KeyPrefix()+"*").Result()
	if err != nil || len(keys) != 3 {
		t.Fatalf("keys %v, %v; want the 3 buckets", keys, err)
	}
	slots := map[int]bool{}
	for _, k := range keys {
		slots[sluiceredis.Slot(k)] = true
	}
	if len(slots) != 3 {
		t.Errorf("3 buckets in %d slots, want 3: %v", len(slots), keys)
	}
}
