package grpclimit_test

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/grpclimit"
)

func ExampleStatus() {
	st := grpclimit.Status(&slerrors.ThrottledError{
		LimitID: "per-caller", LimitKey: "per-caller/caller=alice", Metric: "requests",
		RetryAfter: 1500 * time.Millisecond, Limit: 10,
	})
	fmt.Println(st.Code())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.QuotaFailure:
			v := d.Violations[0]
			fmt.Println("quota:", v.Subject, v.QuotaMetric, v.QuotaValue)
		case *errdetails.RetryInfo:
			fmt.Println("retry in:", d.RetryDelay.AsDuration())
		}
	}
	d, _ := grpclimit.RetryDelay(st.Err())
	fmt.Println("client reads:", d)
	// Output:
	// ResourceExhausted
	// quota: per-caller/caller=alice requests 10
	// retry in: 1.5s
	// client reads: 1.5s
}
