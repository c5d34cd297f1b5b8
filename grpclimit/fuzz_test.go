package grpclimit_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/grpclimit"
)

// FuzzStatus: any error renders as ResourceExhausted whose RetryInfo, when
// the denial is not permanent, is never earlier than RetryAfter.
func FuzzStatus(f *testing.F) {
	f.Add("per-caller", "per-caller/caller=alice", "requests", int64(time.Second), int64(10), false)
	f.Add("\xff", "\x00\xfe", "", int64(-1), int64(-1), true)
	f.Add("", "", "tokens", int64(1<<63-1), int64(1<<63-1), false)
	f.Fuzz(func(t *testing.T, id, key, metric string, retry, limit int64, permanent bool) {
		te := &slerrors.ThrottledError{LimitID: id, LimitKey: key, Metric: metric, RetryAfter: time.Duration(retry), Limit: limit, Permanent: permanent}
		st := grpclimit.Status(te)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("code %v", st.Code())
		}
		d, ok := grpclimit.RetryDelay(st.Err())
		if ok == permanent {
			t.Fatalf("permanent %v but RetryInfo present %v", permanent, ok)
		}
		if ok && d < te.RetryAfter {
			t.Fatalf("RetryInfo %v earlier than RetryAfter %v", d, te.RetryAfter)
		}
	})
}
