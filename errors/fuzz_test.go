package errors_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	slerrors "github.com/sluicehq/sluice/errors"
)

func FuzzRender(f *testing.F) {
	f.Add("rl-abc123/targetName=my-target", "requests", int64(350*time.Millisecond), int64(100), int64(0), int64(time.Minute), []byte(`"request-1"`), false)
	f.Add("", "", int64(0), int64(0), int64(0), int64(0), []byte(nil), true)
	f.Add("\xff\x00\"\\\u2028", "tok\nens", int64(-1), int64(-5), int64(1<<62), int64(1<<63-1), []byte(`{"x":1}`), false)
	f.Add("a", "b", int64(1<<63-1), int64(1<<63-1), int64(-1<<63), int64(-1), []byte("-0.5e-7"), false)
	f.Fuzz(func(t *testing.T, key, metric string, retry, limit, remaining, window int64, id []byte, permanent bool) {
		e := &slerrors.ThrottledError{
			LimitID: key, LimitKey: key, Metric: metric, RetryAfter: time.Duration(retry),
			Limit: limit, Remaining: remaining, Window: time.Duration(window), Permanent: permanent,
		}
		for _, f := range []slerrors.Format{slerrors.HTTPJSON, slerrors.JSONRPC, slerrors.OpenAI, slerrors.Anthropic, slerrors.AWS} {
			checkRoundTrip(t, f, e)
			rec := httptest.NewRecorder()
			if err := (slerrors.Response{Format: f}).Write(rec, e); err != nil {
				t.Fatal(err)
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%v: Write produced invalid JSON %q", f, rec.Body.Bytes())
			}
		}
		body := slerrors.Response{Format: slerrors.JSONRPC, ID: id, Code: 0}.Marshal(e)
		if !json.Valid(body) {
			t.Fatalf("JSON-RPC with id %q: invalid JSON %q", id, body)
		}
		var got struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		// An id that decodes as a JSON-RPC id (string, number, null) is echoed
		// byte for byte; anything else becomes null.
		trimmed := bytes.Trim(id, " \t\r\n") // JSON whitespace only
		var v any
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		validID := json.Valid(trimmed) && dec.Decode(&v) == nil
		switch v.(type) {
		case string, json.Number, nil:
		default:
			validID = false
		}
		if validID && len(trimmed) > 0 && trimmed[0] == '"' && !bytes.Equal(bytes.ToValidUTF8(trimmed, nil), trimmed) {
			validID = false
		}
		if validID && !bytes.Equal(got.ID, trimmed) {
			t.Errorf("valid id %q echoed as %q", id, got.ID)
		}
		if !validID && string(got.ID) != "null" {
			t.Errorf("invalid id %q echoed as %q, want null", id, got.ID)
		}
	})
}
