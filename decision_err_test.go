package sluice_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
)

func TestDecisionErrCarriesQuota(t *testing.T) {
	d := sluice.Decision{
		LimitID: "per-caller", LimitKey: "per-caller/caller=alice", Metric: sluice.MetricRequests,
		RetryAfter: 2 * time.Second, Limit: 100, Remaining: 3, Window: time.Minute,
	}
	te, ok := slerrors.AsThrottled(d.Err())
	if !ok {
		t.Fatalf("Err() = %v, not a *ThrottledError", d.Err())
	}
	if te.Limit != 100 || te.Remaining != 3 || te.Window != time.Minute || te.LimitID != "per-caller" || te.RetryAfter != 2*time.Second {
		t.Errorf("ThrottledError %+v does not carry the decision's quota", te)
	}
	if !errors.Is(te, slerrors.ErrThrottled) {
		t.Error("not ErrThrottled")
	}
	if (sluice.Decision{Allowed: true, Limit: 5}).Err() != nil {
		t.Error("allowed decision has an error")
	}
}
