package sluice_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/enginekit"
	"github.com/sluicehq/sluice/internal/racecheck"
)

// spy records which of the deciding methods an Admitter called and how its
// reservations were settled. held makes its reservations hold something.
type spy struct {
	calls   []string
	settled []string
	held    bool
	err     error
}

func (s *spy) Allow(context.Context, sluice.Keys) (sluice.Decision, error) {
	s.calls = append(s.calls, "Allow")
	return sluice.Decision{Allowed: s.err == nil}, s.err
}

func (s *spy) reservation() sluice.Reservation {
	if !s.held || s.err != nil {
		return sluice.NoReservation
	}
	return sluice.Reservation(enginekit.NewHandle(settler{s}, 7))
}

type settler struct{ s *spy }

func (st settler) Settle(gen uint64, actual int, cancel bool) error {
	switch {
	case gen != 7:
		st.s.settled = append(st.s.settled, "stale")
	case cancel:
		st.s.settled = append(st.s.settled, "cancel")
	default:
		st.s.settled = append(st.s.settled, "reconcile "+string(rune('0'+actual)))
	}
	return nil
}

type reserverSpy struct{ *spy }

func (s reserverSpy) Reserve(_ context.Context, _ sluice.Keys, estimate int) (sluice.Reservation, sluice.Decision, error) {
	s.calls = append(s.calls, "Reserve "+string(rune('0'+estimate)))
	return s.reservation(), sluice.Decision{Allowed: s.err == nil}, s.err
}

type slotSpy struct{ reserverSpy }

func (s slotSpy) ReserveSlots(context.Context, sluice.Keys) (sluice.Reservation, sluice.Decision, error) {
	s.calls = append(s.calls, "ReserveSlots")
	return s.reservation(), sluice.Decision{Allowed: s.err == nil}, s.err
}

func TestAdmitterChoosesOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		mk   func(*spy) sluice.Limiter
		want string
	}{
		{"Limiter", func(s *spy) sluice.Limiter { return s }, "Allow"},
		{"Reserver", func(s *spy) sluice.Limiter { return reserverSpy{s} }, "Reserve 0"},
		// A SlotReserver is a Reserver too: ReserveSlots wins.
		{"SlotReserver", func(s *spy) sluice.Limiter { return slotSpy{reserverSpy{s}} }, "ReserveSlots"},
		// Wrapped, only Allow shows.
		{"hidden SlotReserver", func(s *spy) sluice.Limiter { return struct{ sluice.Limiter }{slotSpy{reserverSpy{s}}} }, "Allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &spy{held: true}
			a := sluice.NewAdmitter(tc.mk(s))
			slots, d, err := a.Admit(context.Background(), sluice.NewKeys("caller", "alice"))
			if err != nil || !d.Allowed {
				t.Fatalf("Admit: %+v, %v", d, err)
			}
			if len(s.calls) != 1 || s.calls[0] != tc.want {
				t.Fatalf("calls %q, want [%s]", s.calls, tc.want)
			}
			if held := tc.want != "Allow"; slots.Held() != held {
				t.Fatalf("Held() = %v, want %v", slots.Held(), held)
			}
			if err := slots.Reconcile(0); err != nil {
				t.Fatal(err)
			}
			if tc.want == "Allow" {
				if len(s.settled) != 0 {
					t.Errorf("nothing was held, yet settled %q", s.settled)
				}
				return
			}
			// Reconcile(0) keeps the request's charge
			// (Cancel would give it back).
			if len(s.settled) != 1 || s.settled[0] != "reconcile 0" {
				t.Errorf("settled %q, want [reconcile 0]", s.settled)
			}
		})
	}
}

func TestAdmitterPassesErrorsAndDenials(t *testing.T) {
	boom := errors.New("backend down")
	s := &spy{held: true, err: boom}
	a := sluice.NewAdmitter(slotSpy{reserverSpy{s}})
	slots, d, err := a.Admit(context.Background(), sluice.Keys{})
	if !errors.Is(err, boom) || d.Allowed || slots.Held() {
		t.Fatalf("Admit on a failing limiter: %v, %+v, held %v", err, d, slots.Held())
	}
	if err := slots.Reconcile(0); err != nil || len(s.settled) != 0 {
		t.Errorf("Reconcile of NoReservation: %v, settled %q", err, s.settled)
	}

	deny := sluice.NewAdmitter(sluice.Deny)
	slots, d, err = deny.Admit(context.Background(), sluice.Keys{})
	if err != nil || d.Allowed || d.LimitID != "deny" || slots.Held() {
		t.Errorf("Admit on Deny: %v, %+v, held %v", err, d, slots.Held())
	}
}

func TestZeroReservation(t *testing.T) {
	var zero sluice.Reservation
	zero.Cancel()
	if zero.Held() || zero.Reconcile(3) != nil || zero != sluice.NoReservation {
		t.Error("the zero Reservation holds something")
	}
}

func TestNewAdmitterNil(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewAdmitter(nil) did not panic")
		}
	}()
	sluice.NewAdmitter(nil)
}

// Admitting through Allow allocates nothing beyond the Limiter.
func TestAdmitAllocatesNothing(t *testing.T) {
	if racecheck.Enabled || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and coverage")
	}
	ctx, keys := context.Background(), sluice.NewKeys("caller", "alice")
	for _, l := range []sluice.Limiter{sluice.Unlimited, sluice.Deny} {
		a := sluice.NewAdmitter(l)
		if n := testing.AllocsPerRun(100, func() {
			slots, _, _ := a.Admit(ctx, keys)
			_ = slots.Reconcile(0)
		}); n != 0 {
			t.Errorf("%T: %.1f allocations per Admit, want 0", l, n)
		}
	}
}

// BenchmarkAdmit compares Admit with calling the chosen method directly,
// on limiters that cost next to nothing, so that what the Admitter adds
// shows: nothing for a SlotReserver (Unlimited is one), one call through
// the adapter for a plain Limiter.
func BenchmarkAdmit(b *testing.B) {
	ctx, keys := context.Background(), sluice.NewKeys("caller", "alice")
	slotReserver := sluice.Unlimited.(sluice.SlotReserver)
	plain := sluice.Limiter(struct{ sluice.Limiter }{sluice.Unlimited})
	admitSlots, admitPlain := sluice.NewAdmitter(slotReserver), sluice.NewAdmitter(plain)
	b.Run("ReserveSlots", func(b *testing.B) {
		for b.Loop() {
			if _, d, _ := slotReserver.ReserveSlots(ctx, keys); !d.Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("Admit-SlotReserver", func(b *testing.B) {
		for b.Loop() {
			if _, d, _ := admitSlots.Admit(ctx, keys); !d.Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("Allow", func(b *testing.B) {
		for b.Loop() {
			if d, _ := plain.Allow(ctx, keys); !d.Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("Admit-Limiter", func(b *testing.B) {
		for b.Loop() {
			if _, d, _ := admitPlain.Admit(ctx, keys); !d.Allowed {
				b.Fatal("denied")
			}
		}
	})
}
