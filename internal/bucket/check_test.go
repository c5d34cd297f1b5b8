package bucket_test

import (
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/internal/bucket"
)

// A take of 0 is a check: it passes while the bucket holds a whole token,
// and refuses when it is empty or in debt, until a token has refilled
// (Envoy's token-quota pattern: check with hits_addend 0, debit the tokens
// used afterwards). It never takes anything.
func TestZeroCostCheckThenDebit(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := bucket.New(rate.Limit(1), 10) // 10 tokens, 1 a second
	tab := bucket.NewTable(rate.Limit(1), 10)
	for _, tc := range []struct {
		name   string
		take   func(at time.Time, n int) bucket.Result
		charge func(at time.Time, n int)
	}{
		{"Bucket", b.TakeN, b.ChargeN},
		{"Table", func(at time.Time, n int) bucket.Result { return tab.TakeN(at, "k", n) },
			func(at time.Time, n int) { tab.ChargeN(at, "k", n) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := tc.take(t0, 0); !r.OK || r.Remaining != 10 {
				t.Fatalf("check on a full bucket: %+v", r)
			}
			if r := tc.take(t0, 10); !r.OK || r.Remaining != 0 {
				t.Fatalf("take 10 of 10: %+v", r)
			}
			// Empty: the check is over, and says when a token is back.
			r := tc.take(t0, 0)
			if r.OK || r.Permanent || r.RetryAfter != time.Second || r.Remaining != 0 {
				t.Fatalf("check on an empty bucket: %+v, want a retry after 1s", r)
			}
			if r := tc.take(t0.Add(time.Second), 0); !r.OK || r.Remaining != 1 {
				t.Fatalf("check once a token refilled: %+v", r)
			}
			// The debit of the tokens used takes the bucket into debt: 1
			// held, 4 charged, 3 owed; the check waits for 4 seconds.
			tc.charge(t0.Add(time.Second), 4)
			r = tc.take(t0.Add(time.Second), 0)
			if r.OK || r.RetryAfter != 4*time.Second || r.Remaining != -3 {
				t.Fatalf("check in debt: %+v, want a retry after 4s", r)
			}
			if r := tc.take(t0.Add(5*time.Second-time.Nanosecond), 0); r.OK {
				t.Fatalf("check before the debt and a token refilled: %+v", r)
			}
			if r := tc.take(t0.Add(5*time.Second), 0); !r.OK || r.Remaining != 1 {
				t.Fatalf("check after the retry: %+v", r)
			}
			if !tcAllow(tc.take, t0.Add(5*time.Second)) {
				t.Fatal("the checks took something")
			}
		})
	}
	// A bucket of burst 0 never holds a token: a check is over for good.
	if r := bucket.New(rate.Limit(1), 0).TakeN(t0, 0); r.OK || !r.Permanent {
		t.Fatalf("check on burst 0: %+v", r)
	}
	if bucket.New(rate.Limit(1), 0).AllowN(t0, 0) {
		t.Fatal("AllowN(0) on burst 0 passed")
	}
}

// tcAllow takes the one token that must be there.
func tcAllow(take func(time.Time, int) bucket.Result, at time.Time) bool {
	return take(at, 1).OK
}
