package bucket_test

// Coming from x/time/rate: the README's section of that name until v0.2,
// kept here with its example.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/bucket"
)

// Coming from golang.org/x/time/rate: a Bucket takes the same rate.Limit and
// burst and has rate.Limiter's methods where they overlap (Allow, Wait,
// WaitN, SetLimit, SetLimitAt, SetBurst, SetBurstAt, Tokens, TokensAt), so
// most code changes only its constructor; AllowN(t, n) is AllowAt(t, n) (in
// sluice a method that takes the instant ends in At, and AllowN(n) reads the
// bucket's clock). What differs:
//
//   - ReserveN becomes TakeAt(t, n), or TakeN(n) on the bucket's clock: a
//     denial takes nothing, and Result.RetryAfter is the exact wait, never
//     early. A cost above the burst is
//     Permanent/OverBurst, not a wait that never ends.
//   - Exact integer arithmetic: in any window Δt at most burst + rate·Δt
//     pass, under any concurrency; a caller with a stale timestamp cannot
//     spend tokens already gone (golang/go#56287).
//   - GiveBack (through the Grant a take returns) for costs known only
//     after the fact (an estimate above the actual cost, a cancelled
//     call); a give-back never hands out a token twice, whatever the interleaving (x/time/rate's CancelAt can:
//     golang/go#69419).
//   - A map[string]*rate.Limiter per caller becomes a Table (idle keys
//     reclaimed, memory bounded); several limits per request, loaded from
//     configuration, become a stack.Stack.
func Example_comingFromRate() {
	b := bucket.New(1, 50) // rate.NewLimiter(1, 50): a token a second, bursts of 50
	fmt.Println(b.Allow()) // lim.Allow()

	if err := b.WaitN(context.Background(), 9); err != nil { // lim.WaitN(ctx, 9): no wait here
		log.Fatal(err)
	}
	// lim.AllowN(time.Now(), 40): the rest of the burst (AllowAt(t, 40) takes the instant)
	fmt.Println(b.AllowN(40))

	// lim.ReserveN(time.Now(), 10) would take the tokens and ask you to wait (or
	// Cancel); TakeN takes nothing on a denial and says exactly how long.
	res := b.TakeN(10)
	fmt.Println(res.OK, res.RetryAfter.Round(time.Second)) // ten tokens at a token a second

	// More than the burst never fits: an error from WaitN, OverBurst from TakeN.
	err := b.WaitN(context.Background(), 51)
	fmt.Println(errors.Is(err, bucket.ErrCostExceedsBurst), b.TakeN(51).OverBurst)
	// Output:
	// true
	// true
	// false 10s
	// true true
}
