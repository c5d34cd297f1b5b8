package bucket_test

import (
	"math"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/bucket"
)

func TestRefundTakeRightAfterIsExact(t *testing.T) {
	b := bucket.New(10, 20)
	b.AllowN(t0, 3)
	res := b.TakeN(t0, 7)
	if !res.OK {
		t.Fatal(res)
	}
	b.RefundTake(res, t0, 7)
	if got := b.TokensAt(t0); got != 17 {
		t.Errorf("tokens after an immediate RefundTake = %v, want 17", got)
	}
	b.RefundTake(bucket.Result{}, t0, 5) // a denied take gives nothing back
	if got := b.TokensAt(t0); got != 17 {
		t.Errorf("RefundTake of a failed take changed tokens: %v", got)
	}
}

// A late refund must not forgive consumption that came after the bucket
// refilled: the seed-style LLM case where a reservation settles long after.
func TestRefundTakeLateNeverOverAdmits(t *testing.T) {
	r := 50.0 / 60 // 50 per minute: one token per 1.2 s
	held := func(refund func(b *bucket.Bucket, res bucket.Result, at time.Time)) float64 {
		b := bucket.New(rate.Limit(r), 50)
		res := b.TakeN(t0, 40) // reserve 40
		if !b.AllowN(t0.Add(30*time.Second), 20) {
			t.Fatal("the other caller's 20 were refused")
		}
		refund(b, res, t0.Add(35*time.Second)) // actual was 10: 30 back
		return b.TokensAt(t0.Add(35 * time.Second))
	}
	// As if the first request had cost 10 from the start.
	ideal := func() float64 {
		b := bucket.New(rate.Limit(r), 50)
		b.AllowN(t0, 10)
		b.AllowN(t0.Add(30*time.Second), 20)
		return b.TokensAt(t0.Add(35 * time.Second))
	}()
	bounded := held(func(b *bucket.Bucket, res bucket.Result, at time.Time) { b.RefundTake(res, at, 30) })
	plain := held(func(b *bucket.Bucket, res bucket.Result, at time.Time) { b.RefundN(at, 30) })
	if bounded > ideal+1e-9 {
		t.Errorf("RefundTake left %.3f tokens, more than the %.3f had the cost been right from the start", bounded, ideal)
	}
	if math.Abs(bounded-30) > 1e-6 {
		t.Errorf("RefundTake left %.3f tokens, want 30 (the 13 s of the take still outstanding)", bounded)
	}
	if plain <= ideal {
		t.Errorf("RefundN left %.3f, expected it to over-refund past %.3f (else this test shows nothing)", plain, ideal)
	}
	// Long after, when the take has refilled by itself, nothing comes back.
	b := bucket.New(rate.Limit(r), 50)
	res := b.TakeN(t0, 40)
	b.AllowN(t0.Add(time.Hour), 50)
	b.RefundTake(res, t0.Add(time.Hour), 30)
	if got := b.TokensAt(t0.Add(time.Hour)); got != 0 {
		t.Errorf("a refund an hour late gave back %v tokens", got)
	}
}

func TestTableRefundTake(t *testing.T) {
	tb := bucket.NewTable(1, 10)
	res := tb.TakeBytes([]byte("k"), t0, 6)
	tb.RefundTakeBytes([]byte("k"), res, t0, 6)
	if got := tb.TokensAt("k", t0); got != 10 {
		t.Errorf("tokens = %v, want 10", got)
	}
}
