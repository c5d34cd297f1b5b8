package stack_test

// The README's Quick start snippet is the body of Example_quickStart,
// verbatim (TestReadmeSnippetsAreExamples in the root package checks it):
// change one, paste it into the other. Example_tokens shows reservations
// for LLM tokens (the README's section until v0.2).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/stack"
)

func Example_quickStart() {
	// A definition written for the gateway's rate-limit API loads unchanged.
	limits, err := stack.Load([]byte(`{"rateLimits": [
	  {"rateLimitId": "per-tool", "dimensionKeys": ["targetName", "toolName"], "entries": [
	    {"dimensions": {"targetName": "my-target", "toolName": "readData"}, "requests": [{"rate": 5, "period": "minute"}]},
	    {"dimensions": {"targetName": "my-target", "toolName": "*"},        "requests": [{"rate": 2, "period": "minute"}]}]},
	  {"rateLimitId": "per-caller", "dimensionKeys": ["caller"], "entries": [
	    {"dimensions": {"caller": "*"}, "requests": [{"rate": 600, "period": "minute"}]}]}
	]}`))
	if err != nil {
		log.Fatal(err) // a bad configuration: every problem, with its JSON path
	}
	ctx := context.Background()
	keys := sluice.NewKeys("targetName", "my-target", "toolName", "readData", "caller", "alice")
	for range 6 {
		d, err := limits.Allow(ctx, keys)
		if err != nil {
			log.Fatal(err) // could not decide: the context ended, or a backend failed
		}
		if !d.Allowed { // d.Err() is the typed *errors.ThrottledError
			fmt.Println("throttled by", d.LimitKey, "retry after", d.RetryAfter.Round(time.Second))
			break
		}
		fmt.Println("allowed,", d.Remaining, "of", d.Limit, "left")
	}
	// Output:
	// allowed, 4 of 5 left
	// allowed, 3 of 5 left
	// allowed, 2 of 5 left
	// allowed, 1 of 5 left
	// allowed, 0 of 5 left
	// throttled by per-tool/targetName=my-target,toolName=readData retry after 12s
}

func Example_tokens() {
	limits, err := stack.Load([]byte(`{"rateLimits": [
	  {"rateLimitId": "tpm", "dimensionKeys": ["qualifiedModelId"], "entries": [
	    {"dimensions": {"qualifiedModelId": "*"}, "tokens": [{"rate": 50, "period": "minute"}]}]}
	]}`))
	if err != nil {
		log.Fatal(err)
	}
	keys := sluice.NewKeys("qualifiedModelId", "my-model")
	callModel := func() (totalTokens int) { return 30 } // the LLM call, reporting its usage

	ask := func(ctx context.Context, estimatedTokens int) error {
		r, d, err := limits.Reserve(ctx, keys, estimatedTokens) // all stacked limits at once, all or nothing
		if err != nil {
			return err
		}
		if !d.Allowed {
			return d.Err() // throttled before the model is called
		}
		defer r.Cancel() // no-op once reconciled; gives everything back on an early return
		used := callModel()
		return r.Reconcile(used) // overrun charged (later requests wait), underrun refunded
	}
	ctx := context.Background()
	fmt.Println(ask(ctx, 51)) // limit 50, estimate 51: can never fit
	fmt.Println(ask(ctx, 40)) // fits; the call uses 30, the other 10 are refunded
	err = ask(ctx, 25)        // 20 left: throttled until 5 more have refilled
	if te, ok := slerrors.AsThrottled(err); ok {
		fmt.Println(errors.Is(err, slerrors.ErrThrottled), te.LimitKey, "retry after", te.RetryAfterSeconds(), "s")
	}
	// Output:
	// sluice: rate limit exceeded for tpm/qualifiedModelId=my-model (tokens): sluice: cost exceeds the burst capacity of the limit
	// <nil>
	// true tpm/qualifiedModelId=my-model retry after 6 s
}
