package bucket

import (
	"errors"
	"fmt"
)

// ErrGiveBack matches (with errors.Is) every error of GiveBack: a Grant
// that records no take of this bucket, or a count it cannot give back.
// Nothing is given back when it is returned.
var ErrGiveBack = errors.New("bucket: invalid give-back")

// A Grant is what a successful take leaves behind so that its tokens can be
// given back: TakeN returns it in Result.Grant, TryTakeN as its third
// result. Give back through the Bucket or Table that made it (GiveBack);
// the Grant keeps count, so it never gives back more than it took, in one
// call or in several.
//
// A give-back is exact, returning every token asked for, when nothing has
// been taken from the bucket since the take, or when no take of the bucket
// (before or since, for a Table: of the key's shard) has used a later
// instant than the take's; a take that was itself stale, behind another
// caller's instant, may get back less. Otherwise a give-back returns what
// it can without handing out a token twice: a
// take since, at an instant after this one, may have found the bucket
// refilled and started over from its own instant, and the refill that
// covered this take's tokens is then already spent. The give-back then
// returns fewer tokens (down to none), never more. That keeps the promise
// of every bucket under any interleaving of takes and give-backs: within
// any window of instants Δt, at most burst + rate·Δt tokens are kept.
//
// A take running at the same moment as the give-back counts as one since:
// a Bucket's take announces its instant before it takes, so a give-back
// that overlaps a take at a later instant may return less, as it would
// after it.
//
// The zero Grant records nothing (a denied take's). A Grant is a value:
// copying it copies the count, so give back through one copy only.
type Grant struct {
	p   *params // the parameters that took (nil: nothing to give back)
	key uint64  // the Bucket's id, or for a Table the first half of the key's digest
	at  int64   // the take's instant, ns since epoch (a reservation's: when its tokens were due)
	end int64   // the state the take left, in p's ticks
	q   int64   // the bucket's (a Table's shard's) give-back counter before the take
	n   int64   // tokens taken and not yet given back
}

// Outstanding returns the number of tokens taken and not yet given back.
func (g *Grant) Outstanding() int64 { return g.n }

// check validates a give-back of n tokens through g.
func (g *Grant) check(n int) error {
	switch {
	case g == nil || g.p == nil:
		return fmt.Errorf("%w: the grant records no take", ErrGiveBack)
	case n < 0:
		return fmt.Errorf("%w: negative count %d", ErrGiveBack, n)
	case int64(n) > g.n:
		return fmt.Errorf("%w: %d tokens asked back, %d outstanding", ErrGiveBack, n, g.n)
	}
	return nil
}

// errForeign is the error for a Grant of another bucket (or Table key).
var errForeign = fmt.Errorf("%w: the grant is from another bucket", ErrGiveBack)
