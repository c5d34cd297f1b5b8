package errors_test

import (
	"bytes"
	"encoding/json"
	stderrors "errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/internal/racecheck"
)

// The bodies below are copied from seed 002 ("受限的响应"), whitespace
// included; the renderers must produce them byte for byte once compacted.
const (
	seedHTTP = `{
    "error": "Rate limit exceeded",
    "success": false,
    "limitKey": "rl-abc123/targetName=my-target",
    "metric": "requests",
    "retryAfter": 1
}`
	seedJSONRPC = `{
    "jsonrpc": "2.0",
    "id": "request-1",
    "error": {
        "code": -32003,
        "message": "Rate limit exceeded",
        "data": {
            "limitKey": "rl-abc123/targetName=my-target",
            "metric": "requests",
            "retryAfter": 1
        }
    }
}`
	seedOpenAI = `{
    "error": {
        "message": "Rate limit exceeded",
        "type": "rate_limit_error",
        "code": "429",
        "limitKey": "rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet",
        "metric": "tokens",
        "retryAfter": 60
    }
}`
	seedAnthropic = `{
    "type": "error",
    "error": {
        "type": "rate_limit_error",
        "message": "Rate limit exceeded",
        "limitKey": "rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet",
        "metric": "tokens",
        "retryAfter": 60
    }
}`
)

func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("compact %q: %v", s, err)
	}
	return b.String()
}

var (
	targetErr = &slerrors.ThrottledError{
		LimitID: "rl-abc123", LimitKey: "rl-abc123/targetName=my-target",
		Metric: "requests", RetryAfter: 350 * time.Millisecond,
	}
	modelErr = &slerrors.ThrottledError{
		LimitID: "rl-abc123", LimitKey: "rl-abc123/qualifiedModelId=anthropic.claude-3-sonnet",
		Metric: "tokens", RetryAfter: 59*time.Second + 1*time.Millisecond,
	}
)

func TestBodiesMatchSeed(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"http", slerrors.Response{}.Append(nil, targetErr), seedHTTP},
		{"http format", slerrors.Response{Format: slerrors.HTTPJSON}.Marshal(targetErr), seedHTTP},
		{"jsonrpc", slerrors.Response{Format: slerrors.JSONRPC, ID: []byte(`"request-1"`), Code: slerrors.DefaultJSONRPCCode}.Marshal(targetErr), seedJSONRPC},
		{"jsonrpc code 0 is default", slerrors.Response{Format: slerrors.JSONRPC, ID: []byte(` "request-1"` + "\n"), Code: 0}.Marshal(targetErr), seedJSONRPC},
		{"openai", slerrors.Response{Format: slerrors.OpenAI}.Append(nil, modelErr), seedOpenAI},
		{"openai format", slerrors.Response{Format: slerrors.OpenAI}.Marshal(modelErr), seedOpenAI},
		{"anthropic", slerrors.Response{Format: slerrors.Anthropic}.Append(nil, modelErr), seedAnthropic},
		{"anthropic format", slerrors.Response{Format: slerrors.Anthropic}.Marshal(modelErr), seedAnthropic},
	}
	for _, tt := range tests {
		if want := compact(t, tt.want); string(tt.got) != want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, want)
		}
	}
}

func TestAWSBody(t *testing.T) {
	got := string(slerrors.Response{Format: slerrors.AWS}.Marshal(targetErr))
	want := `{"__type":"ThrottlingException","message":"Rate exceeded","limitKey":"rl-abc123/targetName=my-target","metric":"requests","retryAfter":1}`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestJSONRPCCustomCodeAndIDs(t *testing.T) {
	tests := []struct {
		id   string
		want string // the id as echoed
	}{
		{`"request-1"`, `"request-1"`},
		{`7`, `7`},
		{`-12345678901234567890`, `-12345678901234567890`}, // kept as written, no float rounding
		{`1.5e3`, `1.5e3`},
		{`null`, `null`},
		{``, `null`},
		{`   `, `null`},
		{`{"a":1}`, `null`},
		{`[1]`, `null`},
		{`true`, `null`},
		{`"unterminated`, `null`},
		{`01`, `null`},
		{`1 2`, `null`},
		{`"a\u0000b"`, `"a\u0000b"`},
		{"\"\xff\"", `null`}, // invalid UTF-8 inside a string
		{`"` + "\x01" + `"`, `null`},
		{`nul`, `null`},
	}
	for _, tt := range tests {
		body := slerrors.Response{Format: slerrors.JSONRPC, ID: []byte(tt.id), Code: -32099}.Marshal(targetErr)
		if !json.Valid(body) {
			t.Fatalf("id %q: invalid JSON %s", tt.id, body)
		}
		var got struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if string(got.ID) != tt.want || got.Error.Code != -32099 || got.JSONRPC != "2.0" {
			t.Errorf("id %q: got id %s code %d jsonrpc %q, want id %s code -32099", tt.id, got.ID, got.Error.Code, got.JSONRPC, tt.want)
		}
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{0, 1},
		{-time.Hour, 1},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{59*time.Second + time.Millisecond, 60},
		{60 * time.Second, 60},
		{time.Duration(math.MaxInt64), int64(math.MaxInt64/int64(time.Second)) + 1},
	}
	for _, tt := range tests {
		e := &slerrors.ThrottledError{RetryAfter: tt.d}
		var got struct {
			RetryAfter int64 `json:"retryAfter"`
		}
		if err := json.Unmarshal(slerrors.Response{}.Append(nil, e), &got); err != nil {
			t.Fatal(err)
		}
		if got.RetryAfter != tt.want {
			t.Errorf("RetryAfter %v: body retryAfter %d, want %d", tt.d, got.RetryAfter, tt.want)
		}
		// Never early: waiting the advertised seconds covers the delay.
		if time.Duration(got.RetryAfter)*time.Second < tt.d && tt.d < time.Duration(math.MaxInt64/2) {
			t.Errorf("RetryAfter %v: advertised %ds is early", tt.d, got.RetryAfter)
		}
	}
}

func TestWriteResponses(t *testing.T) {
	e := &slerrors.ThrottledError{
		LimitID: "per-caller", LimitKey: "per-caller/caller=alice", Metric: "requests",
		RetryAfter: 1500*time.Millisecond + 1, Limit: 100, Remaining: 0, Window: 60 * time.Second,
	}
	tests := []struct {
		name        string
		write       func(http.ResponseWriter) error
		status      int
		contentType string
		bodyPrefix  string
	}{
		{"http", func(w http.ResponseWriter) error { return slerrors.Response{Format: slerrors.HTTPJSON}.Write(w, e) }, 429, "application/json", `{"error":"Rate limit exceeded","success":false,`},
		{"openai", func(w http.ResponseWriter) error { return slerrors.Response{Format: slerrors.OpenAI}.Write(w, e) }, 429, "application/json", `{"error":{"message":`},
		{"anthropic", func(w http.ResponseWriter) error { return slerrors.Response{Format: slerrors.Anthropic}.Write(w, e) }, 429, "application/json", `{"type":"error",`},
		{"aws", func(w http.ResponseWriter) error { return slerrors.Response{Format: slerrors.AWS}.Write(w, e) }, 400, "application/x-amz-json-1.1", `{"__type":"ThrottlingException",`},
		{"jsonrpc", func(w http.ResponseWriter) error {
			return slerrors.Response{Format: slerrors.JSONRPC, ID: []byte("42")}.Write(w, e)
		}, 200, "application/json", `{"jsonrpc":"2.0","id":42,`},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		if err := tt.write(rec); err != nil {
			t.Fatal(err)
		}
		res := rec.Result()
		body := rec.Body.String()
		if res.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, res.StatusCode, tt.status)
		}
		if got := res.Header.Get("Content-Type"); got != tt.contentType {
			t.Errorf("%s: Content-Type %q, want %q", tt.name, got, tt.contentType)
		}
		if !strings.HasPrefix(body, tt.bodyPrefix) || !json.Valid([]byte(body)) {
			t.Errorf("%s: body %s", tt.name, body)
		}
		want := map[string]string{
			"Retry-After":      "2",
			"Retry-After-Ms":   "1501",
			"Ratelimit-Policy": `"per-caller";q=100;w=60`,
			"Ratelimit":        `"per-caller";r=0;t=2`,
			"Content-Length":   strconv.Itoa(len(body)),
		}
		for k, v := range want {
			if got := res.Header.Get(k); got != v {
				t.Errorf("%s: header %s = %q, want %q", tt.name, k, got, v)
			}
		}
		if tt.name == "aws" {
			if got := res.Header.Get("X-Amzn-Errortype"); got != "ThrottlingException" {
				t.Errorf("aws: X-Amzn-ErrorType %q", got)
			}
		}
	}
}

func TestPermanentHeaders(t *testing.T) {
	e := &slerrors.ThrottledError{LimitID: "tpm", Metric: "tokens", Permanent: true, Cause: slerrors.ErrCostExceedsBurst}
	h := http.Header{}
	h.Set("Retry-After", "9") // stale value from an earlier writer must go
	slerrors.SetHeaders(h, e)
	if h.Get("Retry-After") != "" || h.Get("Retry-After-Ms") != "" {
		t.Errorf("permanent denial advertises a retry delay: %v", h)
	}
	if h.Get("X-Should-Retry") != "false" {
		t.Errorf("x-should-retry = %q, want false", h.Get("X-Should-Retry"))
	}
	if h.Get("RateLimit") != "" {
		t.Errorf("RateLimit set with unknown limit: %q", h.Get("RateLimit"))
	}
	// With the limit known: the policy is described, but no reset time is
	// promised for a request that can never pass.
	e.Limit, e.Window = 50, time.Minute
	h = http.Header{}
	h.Set("RateLimit", `"tpm";r=0;t=1`)
	slerrors.SetHeaders(h, e)
	if h.Get("RateLimit") != "" || h.Get("RateLimit-Policy") != `"tpm";q=50;w=60` {
		t.Errorf("permanent denial with a known limit: RateLimit %q, RateLimit-Policy %q", h.Get("RateLimit"), h.Get("RateLimit-Policy"))
	}
}

// A permanent denial's body says that no wait helps, in every format: no
// body tells a client to retry a request that can never succeed.
func TestPermanentBodies(t *testing.T) {
	e := &slerrors.ThrottledError{LimitID: "tpm", LimitKey: "tpm/model=m", Metric: "tokens", Permanent: true, Cause: slerrors.ErrCostExceedsBurst}
	for f, want := range map[slerrors.Format]string{
		slerrors.HTTPJSON:  `{"error":"Rate limit exceeded","success":false,"limitKey":"tpm/model=m","metric":"tokens","permanent":true}`,
		slerrors.JSONRPC:   `{"jsonrpc":"2.0","id":7,"error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"tpm/model=m","metric":"tokens","permanent":true}}}`,
		slerrors.OpenAI:    `{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"429","limitKey":"tpm/model=m","metric":"tokens","permanent":true}}`,
		slerrors.Anthropic: `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit exceeded","limitKey":"tpm/model=m","metric":"tokens","permanent":true}}`,
		slerrors.AWS:       `{"__type":"ThrottlingException","message":"Rate exceeded","limitKey":"tpm/model=m","metric":"tokens","permanent":true}`,
	} {
		if got := string(slerrors.Response{Format: f, ID: []byte("7")}.Marshal(e)); got != want {
			t.Errorf("%v:\n got %s\nwant %s", f, got, want)
		}
	}
}

func TestQuota(t *testing.T) {
	tests := []struct {
		q          slerrors.Quota
		policy, rl string
	}{
		{slerrors.NewQuota("", 10, 10, 10*time.Second), `"default";q=10;w=10`, `"default";r=10;t=0`},
		{slerrors.NewQuota("burst", 100, 40, 60*time.Second), `"burst";q=100;w=60`, `"burst";r=40;t=36`},
		{slerrors.NewQuota("x", 3, 2, time.Second), `"x";q=3;w=1`, `"x";r=2;t=1`},
		{slerrors.NewQuota(`a"b\c`+"\n\u00e9", 5, -3, 500*time.Millisecond), `"a\"b\\c___";q=5;w=1`, `"a\"b\\c___";r=0;t=1`},
		{slerrors.Quota{Policy: "huge", Limit: math.MaxInt64, Remaining: math.MaxInt64, Window: math.MaxInt64, Reset: math.MaxInt64},
			`"huge";q=999999999999999;w=9223372037`, `"huge";r=999999999999999;t=9223372037`},
	}
	for _, tt := range tests {
		if got := string(tt.q.AppendPolicy(nil)); got != tt.policy {
			t.Errorf("%+v policy %s, want %s", tt.q, got, tt.policy)
		}
		if got := string(tt.q.AppendRateLimit(nil)); got != tt.rl {
			t.Errorf("%+v ratelimit %s, want %s", tt.q, got, tt.rl)
		}
	}
	h := http.Header{}
	slerrors.SetRateLimitHeaders(h, slerrors.Quota{})
	if len(h) != 0 {
		t.Errorf("zero quota set headers %v", h)
	}
}

func TestFormatNames(t *testing.T) {
	for _, f := range []slerrors.Format{slerrors.HTTPJSON, slerrors.JSONRPC, slerrors.OpenAI, slerrors.Anthropic, slerrors.AWS} {
		g, err := slerrors.ParseFormat(f.String())
		if err != nil || g != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f.String(), g, err)
		}
	}
	if _, err := slerrors.ParseFormat("grpc"); err == nil || !strings.Contains(err.Error(), `"grpc"`) {
		t.Errorf("ParseFormat(grpc) error %v", err)
	}
	if got := slerrors.Format(99).String(); got != "Format(99)" {
		t.Errorf("unknown format String %q", got)
	}
	if !json.Valid(slerrors.Response{Format: 99}.Marshal(stderrors.New("denied"))) {
		t.Error("unknown format with nil error is not valid JSON")
	}
}

func TestEscaping(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "ctl\x00\x1f\n\r\t", "\u2028\u2029", "é日本", "bad\xff\xfeutf8", "<script>&"} {
		e := &slerrors.ThrottledError{LimitKey: s, Metric: s}
		for _, f := range []slerrors.Format{slerrors.HTTPJSON, slerrors.JSONRPC, slerrors.OpenAI, slerrors.Anthropic, slerrors.AWS} {
			checkRoundTrip(t, f, e)
		}
	}
}

// checkRoundTrip decodes a rendered body and compares limitKey and metric
// with what encoding/json makes of the same strings.
func checkRoundTrip(t *testing.T, f slerrors.Format, e *slerrors.ThrottledError) {
	t.Helper()
	body := slerrors.Response{Format: f}.Marshal(e)
	if !json.Valid(body) {
		t.Fatalf("%v: invalid JSON %q", f, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	fields := m
	switch f {
	case slerrors.JSONRPC:
		fields = m["error"].(map[string]any)["data"].(map[string]any)
	case slerrors.OpenAI, slerrors.Anthropic:
		fields = m["error"].(map[string]any)
	}
	want := func(s string) string {
		b, _ := json.Marshal(s)
		var out string
		_ = json.Unmarshal(b, &out)
		return out
	}
	if fields["limitKey"] != want(e.LimitKey) || fields["metric"] != want(e.Metric) {
		t.Errorf("%v: limitKey %q metric %q, want %q %q", f, fields["limitKey"], fields["metric"], want(e.LimitKey), want(e.Metric))
	}
	if e.Permanent {
		if _, has := fields["retryAfter"]; has || fields["permanent"] != true {
			t.Errorf("%v: a permanent denial with retryAfter %v, permanent %v; want permanent and no retryAfter", f, fields["retryAfter"], fields["permanent"])
		}
		return
	}
	if ra, ok := fields["retryAfter"].(float64); !ok || int64(ra) != e.RetryAfterSeconds() {
		t.Errorf("%v: retryAfter %v, want %d", f, fields["retryAfter"], e.RetryAfterSeconds())
	}
}

func TestAppendDoesNotAllocate(t *testing.T) {
	if testing.CoverMode() != "" || racecheck.Enabled {
		t.Skip("allocation counts differ under -cover and -race")
	}
	buf := make([]byte, 0, 512)
	id := []byte(`"request-1"`)
	for _, f := range []slerrors.Format{slerrors.HTTPJSON, slerrors.OpenAI, slerrors.Anthropic, slerrors.AWS} {
		if n := testing.AllocsPerRun(100, func() { buf = slerrors.Response{Format: f}.Append(buf[:0], modelErr) }); n != 0 {
			t.Errorf("%v: %v allocs per Response.Append, want 0", f, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { buf = slerrors.Response{Format: slerrors.JSONRPC, ID: id}.Append(buf[:0], targetErr) }); n != 0 {
		t.Errorf("Response.Append, JSONRPC: %v allocs, want 0", n)
	}
}

func BenchmarkResponseAppend(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = slerrors.Response{}.Append(buf[:0], targetErr)
	}
}

// BenchmarkEncodingJSON is the peer: the same body through encoding/json
// with an ordered struct.
func BenchmarkEncodingJSON(b *testing.B) {
	type body struct {
		Error      string `json:"error"`
		Success    bool   `json:"success"`
		LimitKey   string `json:"limitKey"`
		Metric     string `json:"metric"`
		RetryAfter int64  `json:"retryAfter"`
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = json.Marshal(body{"Rate limit exceeded", false, targetErr.LimitKey, targetErr.Metric, targetErr.RetryAfterSeconds()})
	}
}
