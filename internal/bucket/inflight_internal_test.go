package bucket

import (
	"testing"
	"time"
)

// TestGiveBackBesideTakeInFlight steps, one atomic action at a time, the
// interleaving that internal/lincheck's TestLinearizableBuckets recorded
// as "illegal" on Bucket.GrantFor+GiveBack (seed 35 of one run):
//
//	c4 [237,239] #102 take@39660 b0:2 (held) -> ok, 2 left
//	c0 [238,242] #103 take@39763 b0:1 -> ok, 2 left
//	c4 [240,241] give back #102 @39660 b0:2 (last)
//
// #103 raises the high-water instant before its compare-and-swap (so that
// a give-back that finds its state also finds its instant); #102's
// give-back runs between the two, sees a take at a later instant than its
// own, and returns 103 µs of refill less than it took; #103's swap then
// fails, it rereads and takes from the state the give-back left. The
// bucket is stricter than a give-back linearized before #103 would make it
// (2 left, not 3), never looser: what each step leaves is checked against
// the bound.
func TestGiveBackBesideTakeInFlight(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(us int64) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	for _, tc := range []struct {
		name     string
		inFlight bool // #103 has raised the mark when #102 is given back
		left     int64
		tokens   float64 // at 39763 µs, before #103 takes
	}{
		{name: "no take in flight", inFlight: false, left: 3, tokens: 4},
		{name: "take in flight", inFlight: true, left: 2, tokens: 4 - 0.001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(1000, 4)
			if ok, left := b.TryTakeN(at(39660), 2); !ok || left != 2 {
				t.Fatalf("#102: %v, %d left; want ok, 2 left", ok, left)
			}
			g := b.GrantFor(at(39660), 2)
			c := b.c.Load()
			if tc.inFlight {
				raise(&c.high, nsOf(at(39763))) // #103's first step
			}
			if err := b.GiveBack(&g, 2); err != nil {
				t.Fatal(err)
			}
			got := b.TokensAt(at(39763))
			if got > 4 || got < tc.tokens-0.0011 || got > tc.tokens+0.0011 {
				t.Errorf("after the give-back: %.4f tokens at 39763 µs, want %.3f (never above the burst)", got, tc.tokens)
			}
			if ok, left := b.TryTakeN(at(39763), 1); !ok || left != tc.left {
				t.Errorf("#103: %v, %d left; want ok, %d left", ok, left, tc.left)
			}
		})
	}
}
