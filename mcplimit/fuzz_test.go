package mcplimit_test

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/mcplimit"
)

// FuzzError: any throttled error round-trips through Error and ParseError,
// and arbitrary data never makes ParseError panic.
func FuzzError(f *testing.F) {
	f.Add("per-tool/toolName=readData", "requests", int64(time.Second), 0, []byte(`{"retryAfter":"x"}`))
	f.Add("\xff\"", "", int64(-1), 429, []byte(`null`))
	f.Fuzz(func(t *testing.T, key, metric string, retry int64, code int, raw []byte) {
		te := &slerrors.ThrottledError{LimitKey: key, Metric: metric, RetryAfter: time.Duration(retry)}
		d, ok := mcplimit.ParseError(mcplimit.Error(te, code), code)
		if !ok || d.RetryAfter != te.RetryAfterSeconds() {
			t.Fatalf("round trip: %+v %v", d, ok)
		}
		_, _ = mcplimit.ParseError(&jsonrpc.Error{Code: int64(code), Data: raw}, code)
	})
}
