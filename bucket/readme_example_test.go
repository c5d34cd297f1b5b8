package bucket_test

// The README's "Coming from x/time/rate" snippet is the body of this
// example, verbatim (TestReadmeSnippetsAreExamples in the root package
// checks it).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/bucket"
)

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
