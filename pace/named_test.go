package pace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/pace"
)

// Named upstreams (for other protocols) pause like HTTP ones, bounded by
// the maximum wait, and absurd delays fall back to the default pause.
func TestNamedUpstreams(t *testing.T) {
	clk := newStepClock()
	tr := pace.New(nil, pace.WithClock(clk), pace.WithJitter(noJitter), pace.WithMaxWait(10*time.Second))
	ctx := context.Background()
	if err := tr.Wait(ctx, "dns:///api"); err != nil {
		t.Fatal(err)
	}
	tr.Throttled(ctx, "dns:///api", 1500*time.Millisecond, true, 8)
	if err := tr.Wait(ctx, "dns:///other"); err != nil || len(clk.Slept()) != 0 {
		t.Fatalf("another upstream waited: %v %v", err, clk.Slept())
	}
	if err := tr.Wait(ctx, "dns:///api"); err != nil {
		t.Fatal(err)
	}
	if got := clk.Slept(); len(got) != 1 || got[0] != 1500*time.Millisecond {
		t.Fatalf("slept %v, want [1.5s]", got)
	}
	tr.Throttled(ctx, "dns:///api", time.Minute, true, 8)
	if err := tr.Wait(ctx, "dns:///api"); !errors.Is(err, pace.ErrMaxWait) {
		t.Fatalf("err %v, want ErrMaxWait", err)
	}
	tr.Throttled(ctx, "dns:///b", 1000000*time.Hour, true, 8) // absurd: the default pause, 1 s
	_ = tr.Wait(ctx, "dns:///b")
	if got := clk.Slept(); got[len(got)-1] != time.Second {
		t.Fatalf("absurd delay: slept %v", got)
	}
}
