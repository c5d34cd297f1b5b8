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
		if got := tt.r.Marshal(tt.d.Err()); string(got) != want {
			t.Errorf("%s: Marshal\n got %s\nwant %s", tt.name, got, want)
		}
		if got := tt.r.Append([]byte("prefix:"), tt.d.Err()); string(got) != "prefix:"+want {
			t.Errorf("%s: Append\n got %s\nwant prefix:%s", tt.name, got, want)
		}
		rec := httptest.NewRecorder()
		if err := tt.r.Write(rec, tt.d.Err()); err != nil {
			t.Fatal(err)
		}
		if rec.Body.String() != want {
			t.Errorf("%s: Write body\n got %s\nwant %s", tt.name, rec.Body, want)
		}
	}
}

// Response.Write of a Decision's error is Response.Write of the
// ThrottledError it describes: Decision.Err carries every field a response
// shows (status, headers, body), for every format, temporary and permanent
// denials alike.
func TestResponseOfADecisionIsItsThrottledError(t *testing.T) {
	denials := []*slerrors.ThrottledError{
		{LimitID: "per-caller", LimitKey: "per-caller/caller=alice", Metric: "requests", RetryAfter: 1500*time.Millisecond + 1, Limit: 100, Window: time.Minute},
		{LimitID: "tpm", LimitKey: "tpm/model=m", Metric: "tokens", Permanent: true, Limit: 10, Window: time.Minute},
		{},
	}
	id, code := []byte(` 42 `), -32050
	for _, e := range denials {
		d := decisionOf(e)
		for _, f := range allFormats {
			r := slerrors.Response{Format: f, ID: id, Code: code}
			want := httptest.NewRecorder()
			if err := r.Write(want, e); err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			if err := r.Write(rec, d.Err()); err != nil {
				t.Fatal(err)
			}
			if rec.Code != want.Code || rec.Body.String() != want.Body.String() {
				t.Errorf("%v %+v: got %d %s, want %d %s", f, e, rec.Code, rec.Body, want.Code, want.Body)
			}
			if diff := cmp.Diff(want.Header(), rec.Header()); diff != "" {
				t.Errorf("%v %+v: headers (-ThrottledError +Decision):\n%s", f, e, diff)
			}
		}
	}
}

func TestResponseOfAnAllowedDecisionWritesNothing(t *testing.T) {
	for _, err := range []error{sluice.Decision{Allowed: true, Limit: 10, Remaining: 9}.Err(), nil} {
		for _, f := range allFormats {
			r := slerrors.Response{Format: f, ID: []byte("1")}
			if got := r.Marshal(err); got != nil {
				t.Errorf("%v, %#v: Marshal = %s, want nil", f, err, got)
			}
			if got := r.Append([]byte("x"), err); string(got) != "x" {
				t.Errorf("%v, %#v: Append = %s, want the buffer unchanged", f, err, got)
			}
			rec := httptest.NewRecorder()
			if err := r.Write(rec, err); err != nil {
				t.Fatal(err)
			}
			if rec.Body.Len() != 0 || len(rec.Header()) != 0 || rec.Code != 200 {
				t.Errorf("%v, %#v: wrote %d %v %q, want nothing", f, err, rec.Code, rec.Header(), rec.Body)
			}
		}
	}
}

// An error that holds no ThrottledError still renders a throttled response
// (naming no limit), and one that wraps a ThrottledError renders it.
func TestResponseOfOtherErrors(t *testing.T) {
	r := slerrors.Response{Format: slerrors.OpenAI}
	got := string(r.Marshal(stderrors.New("over quota")))
	want := `{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"","metric":"","retryAfter":1}}`
	if got != want {
		t.Errorf("plain error:\n got %s\nwant %s", got, want)
	}
	wrapped := fmtWrap{modelErr}
	if got, want := string(r.Marshal(wrapped)), compact(t, seedOpenAI); got != want {
		t.Errorf("wrapped ThrottledError:\n got %s\nwant %s", got, want)
	}
	var nilTE *slerrors.ThrottledError // a nil *ThrottledError in an error: a denial naming nothing
	if got := string(r.Marshal(nilTE)); got != want {
		t.Errorf("nil *ThrottledError:\n got %s\nwant %s", got, want)
	}
}

type fmtWrap struct{ err error }

func (w fmtWrap) Error() string { return "wrapped: " + w.err.Error() }
func (w fmtWrap) Unwrap() error { return w.err }

// Rendering a Decision costs the ThrottledError that Decision.Err builds,
// nothing per format.
func TestResponseAppendAllocations(t *testing.T) {
	if testing.CoverMode() != "" || racecheck.Enabled {
		t.Skip("allocation counts differ under -cover and -race")
	}
	buf := make([]byte, 0, 512)
	d := decisionOf(targetErr)
	for _, f := range allFormats {
		r := slerrors.Response{Format: f, ID: []byte(`"request-1"`)}
		if n := testing.AllocsPerRun(100, func() { buf = r.Append(buf[:0], d.Err()) }); n > 1 {
			t.Errorf("%v: %v allocs per Response.Append, want at most 1", f, n)
		}
		if n := testing.AllocsPerRun(100, func() { buf = r.Append(buf[:0], targetErr) }); n != 0 {
			t.Errorf("%v: %v allocs per Response.Append of a ThrottledError, want 0", f, n)
		}
	}
}

// FuzzResponse: every body is valid JSON, the same for a Decision and its
// ThrottledError, and says when to retry (retryAfter ≥ 1) or, for a
// permanent denial, that no wait helps ("permanent":true, no retryAfter).
func FuzzResponse(f *testing.F) {
	f.Add("rl-abc123/targetName=my-target", "requests", int64(350*time.Millisecond), int64(100), []byte(`"request-1"`), 0, false)
	f.Add("", "", int64(0), int64(0), []byte(nil), -32099, true)
	f.Add("\xff\x00\"\\\u2028", "tok\nens", int64(-1), int64(-5), []byte(`{"x":1}`), 7, false)
	f.Fuzz(func(t *testing.T, key, metric string, retry, limit int64, id []byte, code int, permanent bool) {
		e := &slerrors.ThrottledError{LimitID: key, LimitKey: key, Metric: metric, RetryAfter: time.Duration(retry), Limit: limit, Window: time.Minute, Permanent: permanent}
		d := decisionOf(e)
		for _, f := range allFormats {
			r := slerrors.Response{Format: f, ID: id, Code: code}
			got := r.Marshal(d.Err())
			if want := r.Marshal(e); !bytes.Equal(got, want) || !json.Valid(got) {
				t.Fatalf("%v: Response body %q, want %q (valid JSON)", f, got, want)
			}
			wait := waitOf(t, got)
			if permanent && (!wait.Permanent || wait.RetryAfter != nil) {
				t.Fatalf("%v: a permanent denial's body %s, want permanent and no retryAfter", f, got)
			}
			if !permanent && (wait.Permanent || wait.RetryAfter == nil || *wait.RetryAfter < 1) {
				t.Fatalf("%v: a denial's body %s, want retryAfter ≥ 1", f, got)
			}
		}
	})
}

type wait struct {
	RetryAfter *int64 `json:"retryAfter"`
	Permanent  bool   `json:"permanent"`
}

// waitOf returns the retryAfter and permanent members of a body, wherever
// the format puts them (top level, "error" or "error"."data").
func waitOf(t *testing.T, body []byte) wait {
	t.Helper()
	var v struct {
		wait
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	if v.RetryAfter != nil || v.Permanent {
		return v.wait
	}
	var inner struct {
		wait
		Data *wait `json:"data"`
	}
	if len(v.Error) > 0 && v.Error[0] == '{' {
		if err := json.Unmarshal(v.Error, &inner); err != nil {
			t.Fatal(err)
		}
	}
	if inner.Data != nil {
		return *inner.Data
	}
	return inner.wait
}

// BenchmarkRenderDecision renders one JSON-RPC denial of a Decision, and of
// the ThrottledError it describes.
func BenchmarkRenderDecision(b *testing.B) {
	d := decisionOf(targetErr)
	id := []byte(`"request-1"`)
	buf := make([]byte, 0, 512)
	r := slerrors.Response{Format: slerrors.JSONRPC, ID: id}
	b.Run("ThrottledError", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = r.Append(buf[:0], targetErr)
		}
	})
	b.Run("Decision", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = r.Append(buf[:0], d.Err())
		}
	})
}
