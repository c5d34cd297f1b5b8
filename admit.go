package sluice

import "context"

// Admitter admits whole requests to a Limiter the way the middlewares
// (httplimit, grpclimit, mcplimit) do, holding connection slots for the
// length of each request when the Limiter has them:
//
//   - a SlotReserver (a stack.Stack, and its otelattr and otelmetric
//     wrappers) is asked ReserveSlots, so a request holds a slot of every
//     connections limit that applies to it, and a request no connections
//     limit applies to costs what Allow costs;
//   - a Limiter that is only a Reserver is asked Reserve with an estimate of
//     0;
//   - any other Limiter is asked Allow, and holds nothing.
//
// NewAdmitter makes that choice once, so Admit costs the chosen method and a
// branch. Requests limits are charged once whichever method is chosen;
// tokens limits are not charged (nothing is estimated): a caller that knows a
// request's cost calls Reserve and Reconcile itself.
//
// To admit through Allow alone, hiding the reserving methods of a Limiter
// (connections limits are then not enforced), wrap it:
// NewAdmitter(struct{ sluice.Limiter }{l}).
//
// An Admitter is safe for concurrent use when its Limiter is. Build it with
// NewAdmitter: the zero Admitter has no Limiter, and its Admit panics.
type Admitter struct {
	l  Limiter
	sr SlotReserver // l, when it is one
	rs Reserver     // l, when it is one and no SlotReserver
}

// NewAdmitter returns the Admitter of l. It panics if l is nil (a
// programming error, caught at construction like the middlewares' own).
func NewAdmitter(l Limiter) Admitter {
	if l == nil {
		panic("sluice: NewAdmitter needs a Limiter")
	}
	a := Admitter{l: l}
	if a.sr, _ = l.(SlotReserver); a.sr == nil {
		a.rs, _ = l.(Reserver)
	}
	return a
}

// Admit decides one request with keys. It returns what the request holds
// until it ends (call Release then, also when the request panics: a defer
// does both), the Decision, and the Limiter's error when it could not
// decide. On a denial and on an error the Slots hold nothing, so it is
// always safe to call their methods.
func (a *Admitter) Admit(ctx context.Context, keys Keys) (Slots, Decision, error) {
	switch {
	case a.sr != nil:
		r, d, err := a.sr.ReserveSlots(ctx, keys)
		return Slots{r}, d, err
	case a.rs != nil:
		r, d, err := a.rs.Reserve(ctx, keys, 0)
		return Slots{r}, d, err
	}
	d, err := a.l.Allow(ctx, keys)
	return Slots{}, d, err
}

// Slots is what a request admitted by an Admitter holds until it ends: a
// slot of every connections limit that applies to it. It is a small value;
// copy it freely. The zero Slots hold nothing.
type Slots struct{ r Reservation }

// Held reports whether s holds anything; a caller can skip its Release when
// it does not.
func (s Slots) Held() bool { return s.r.Held() }

// Release gives back the slots; the request's charge of every other limit
// stays. Only the first Release of any copy takes effect; later ones do
// nothing and return nil. The error is a backend's that could not take the
// slots back (a slot a backend holds as a lease is then freed when the
// lease expires); a deferred Release drops it.
func (s Slots) Release() error { return s.r.Reconcile(0) }
