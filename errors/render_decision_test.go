package errors_test

import (
	"bytes"
	"encoding/json"
	stderrors "errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/internal/racecheck"
)

var allFormats = []slerrors.Format{slerrors.HTTPJSON, slerrors.JSONRPC, slerrors.OpenAI, slerrors.Anthropic, slerrors.AWS}

// decisionOf is the sluice.Decision whose Err is e.
func decisionOf(e *slerrors.ThrottledError) sluice.Decision {
	return sluice.Decision{
		LimitID: e.LimitID, LimitKey: e.LimitKey, Metric: e.Metric, RetryAfter: e.RetryAfter,
		Permanent: e.Permanent, Limit: e.Limit, Remaining: e.Remaining, Window: e.Window,
	}
}

// Response renders a sluice.Decision in one call, and the bodies are the
// seed's, byte for byte; the JSON-RPC one echoes the request's id.
func TestResponseBodiesMatchSeed(t *testing.T) {
	tests := []struct {
		name string
		r    slerrors.Response
		d    sluice.Decision
		want string
	}{
		{"zero Response is http", slerrors.Response{}, decisionOf(targetErr), seedHTTP},
		{"http", slerrors.Response{Format: slerrors.HTTPJSON}, decisionOf(targetErr), seedHTTP},
		{"jsonrpc echoes the id", slerrors.Response{Format: slerrors.JSONRPC, ID: []byte(`"request-1"`)}, decisionOf(targetErr), seedJSONRPC},
		{"jsonrpc code 0 is default", slerrors.Response{Format: slerrors.JSONRPC, ID: []byte(`"request-1"`), Code: 0}, decisionOf(targetErr), seedJSONRPC},
		{"openai", slerrors.Response{Format: slerrors.OpenAI}, decisionOf(modelErr), seedOpenAI},
		{"anthropic", slerrors.Response{Format: slerrors.Anthropic}, decisionOf(modelErr), seedAnthropic},
	}
	for _, tt := range tests {
		want := compact(t, tt.want)
		if got := tt.r.Marshal(tt.d); string(got) != want {
			t.Errorf("%s: Marshal\n got %s\nwant %s", tt.name, got, want)
		}
		if got := tt.r.Append([]byte("prefix:"), tt.d); string(got) != "prefix:"+want {
			t.Errorf("%s: Append\n got %s\nwant prefix:%s", tt.name, got, want)
		}
		rec := httptest.NewRecorder()
		if err := tt.r.Write(rec, tt.d); err != nil {
			t.Fatal(err)
		}
		if rec.Body.String() != want {
			t.Errorf("%s: Write body\n got %s\nwant %s", tt.name, rec.Body, want)
		}
	}
}

// Response.Write is Format.Write (or WriteJSONRPC) on the decision's error:
// the same status, headers and body, for every format, temporary and
// permanent denials alike.
func TestResponseWriteEqualsTheThreeSteps(t *testing.T) {
	denials := []*slerrors.ThrottledError{
		{LimitID: "per-caller", LimitKey: "per-caller/caller=alice", Metric: "requests", RetryAfter: 1500*time.Millisecond + 1, Limit: 100, Window: time.Minute},
		{LimitID: "tpm", LimitKey: "tpm/model=m", Metric: "tokens", Permanent: true, Limit: 10, Window: time.Minute},
		{},
	}
	id, code := []byte(` 42 `), -32050
	for _, e := range denials {
		d := decisionOf(e)
		for _, f := range allFormats {
			// The three steps of before: d.Err(), AsThrottled, then the writer.
			te, ok := slerrors.AsThrottled(d.Err())
			if !ok {
				t.Fatal("a denial without a ThrottledError")
			}
			old := httptest.NewRecorder()
			if f == slerrors.JSONRPC {
				_ = slerrors.WriteJSONRPC(old, te, id, code)
			} else {
				_ = f.Write(old, te)
			}
			rec := httptest.NewRecorder()
			if err := (slerrors.Response{Format: f, ID: id, Code: code}).Write(rec, d); err != nil {
				t.Fatal(err)
			}
			if rec.Code != old.Code || rec.Body.String() != old.Body.String() {
				t.Errorf("%v %+v: got %d %s, want %d %s", f, e, rec.Code, rec.Body, old.Code, old.Body)
			}
			if diff := cmp.Diff(old.Header(), rec.Header()); diff != "" {
				t.Errorf("%v %+v: headers (-three steps +Response):\n%s", f, e, diff)
			}
		}
	}
}

func TestResponseOfAnAllowedDecisionWritesNothing(t *testing.T) {
	for _, d := range []slerrors.Denial{sluice.Decision{Allowed: true, Limit: 10, Remaining: 9}, nil} {
		for _, f := range allFormats {
			r := slerrors.Response{Format: f, ID: []byte("1")}
			if got := r.Marshal(d); got != nil {
				t.Errorf("%v, %#v: Marshal = %s, want nil", f, d, got)
			}
			if got := r.Append([]byte("x"), d); string(got) != "x" {
				t.Errorf("%v, %#v: Append = %s, want the buffer unchanged", f, d, got)
			}
			rec := httptest.NewRecorder()
			if err := r.Write(rec, d); err != nil {
				t.Fatal(err)
			}
			if rec.Body.Len() != 0 || len(rec.Header()) != 0 || rec.Code != 200 {
				t.Errorf("%v, %#v: wrote %d %v %q, want nothing", f, d, rec.Code, rec.Header(), rec.Body)
			}
		}
	}
}

type plainDenial struct{ err error }

func (p plainDenial) Err() error { return p.err }

// A Denial whose error holds no ThrottledError still renders a throttled
// response (naming no limit), and one that wraps a ThrottledError renders it.
func TestResponseOfOtherDenials(t *testing.T) {
	r := slerrors.Response{Format: slerrors.OpenAI}
	got := string(r.Marshal(plainDenial{stderrors.New("over quota")}))
	want := `{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"","metric":"","retryAfter":1}}`
	if got != want {
		t.Errorf("plain error:\n got %s\nwant %s", got, want)
	}
	wrapped := plainDenial{fmtWrap{modelErr}}
	if got, want := string(r.Marshal(wrapped)), compact(t, seedOpenAI); got != want {
		t.Errorf("wrapped ThrottledError:\n got %s\nwant %s", got, want)
	}
}

type fmtWrap struct{ err error }

func (w fmtWrap) Error() string { return "wrapped: " + w.err.Error() }
func (w fmtWrap) Unwrap() error { return w.err }

// Rendering a Decision costs the ThrottledError that Decision.Err builds and
// the interface conversion of the Decision, nothing per format.
func TestResponseAppendAllocations(t *testing.T) {
	if testing.CoverMode() != "" || racecheck.Enabled {
		t.Skip("allocation counts differ under -cover and -race")
	}
	buf := make([]byte, 0, 512)
	d := decisionOf(targetErr)
	for _, f := range allFormats {
		r := slerrors.Response{Format: f, ID: []byte(`"request-1"`)}
		if n := testing.AllocsPerRun(100, func() { buf = r.Append(buf[:0], d) }); n > 2 {
			t.Errorf("%v: %v allocs per Response.Append, want at most 2", f, n)
		}
	}
}

func FuzzResponse(f *testing.F) {
	f.Add("rl-abc123/targetName=my-target", "requests", int64(350*time.Millisecond), int64(100), []byte(`"request-1"`), 0, false)
	f.Add("", "", int64(0), int64(0), []byte(nil), -32099, true)
	f.Add("\xff\x00\"\\\u2028", "tok\nens", int64(-1), int64(-5), []byte(`{"x":1}`), 7, false)
	f.Fuzz(func(t *testing.T, key, metric string, retry, limit int64, id []byte, code int, permanent bool) {
		e := &slerrors.ThrottledError{LimitID: key, LimitKey: key, Metric: metric, RetryAfter: time.Duration(retry), Limit: limit, Window: time.Minute, Permanent: permanent}
		d := decisionOf(e)
		for _, f := range allFormats {
			got := slerrors.Response{Format: f, ID: id, Code: code}.Marshal(d)
			want := f.Marshal(e)
			if f == slerrors.JSONRPC {
				want = slerrors.MarshalJSONRPC(e, id, code)
			}
			if !bytes.Equal(got, want) || !json.Valid(got) {
				t.Fatalf("%v: Response body %q, want %q (valid JSON)", f, got, want)
			}
		}
	})
}

// BenchmarkRenderDecision compares Response.Append with the three steps it
// replaces (Decision.Err, AsThrottled, AppendJSONRPC), on one JSON-RPC denial.
func BenchmarkRenderDecision(b *testing.B) {
	d := decisionOf(targetErr)
	id := []byte(`"request-1"`)
	buf := make([]byte, 0, 512)
	b.Run("three-steps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			te, _ := slerrors.AsThrottled(d.Err())
			buf = slerrors.AppendJSONRPC(buf[:0], te, id, 0)
		}
	})
	b.Run("Response", func(b *testing.B) {
		r := slerrors.Response{Format: slerrors.JSONRPC, ID: id}
		b.ReportAllocs()
		for b.Loop() {
			buf = r.Append(buf[:0], d)
		}
	})
}
