package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
	"github.com/sluicehq/sluice/httplimit"
)

// TestOptionsNotGiven walks every option with the values the option rule
// calls "not given" (zero, nil, a Format the errors package does not
// define): none panics, and the middleware answers as with no option: a
// denial in the HTTPJSON body with status 429 and the RateLimit fields, a
// key error with DefaultErrorResponder's 400. New has no error result: no
// option can be wrong in another way.
func TestOptionsNotGiven(t *testing.T) {
	cases := map[string]httplimit.Option{
		"nil Option":              nil,
		"WithFormat(Format(5))":   httplimit.WithFormat(slerrors.Format(5)),
		"WithFormat(Format(99))":  httplimit.WithFormat(slerrors.Format(99)),
		"WithJSONRPCCode(0)":      httplimit.WithJSONRPCCode(0),
		"WithErrorResponder(nil)": httplimit.WithErrorResponder(nil),
		"WithErrorHandler(nil)":   httplimit.WithErrorHandler(nil),
	}
	keys := func(r *http.Request) (sluice.Keys, error) {
		if r.Header.Get("X-Bad") != "" {
			return sluice.Keys{}, errors.New("bad keys")
		}
		return sluice.NewKeys("caller", "a"), nil
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			h := httplimit.New(sluice.Deny, keys, o)(next)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"jsonrpc":"2.0","id":1}`)))
			if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"success":false`) {
				t.Errorf("denial: %d %s; want the default HTTPJSON 429", rec.Code, rec.Body)
			}
			rec = httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set("X-Bad", "1")
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest {
				t.Errorf("key error: %d, want DefaultErrorResponder's 400", rec.Code)
			}
		})
	}
}

// TestOptionsNotGivenKeepEarlier: WithJSONRPCCode(0) is the default code,
// and "not given" values leave what an earlier option set.
func TestOptionsNotGivenKeepEarlier(t *testing.T) {
	keys := func(*http.Request) (sluice.Keys, error) { return sluice.NewKeys("caller", "a"), nil }
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		name string
		opts []httplimit.Option
		want string
	}{
		{"WithJSONRPCCode(0)", []httplimit.Option{httplimit.WithFormat(slerrors.JSONRPC), httplimit.WithJSONRPCCode(0)}, `"code":-32003`},
		{"WithJSONRPCCode(-32050), then 0", []httplimit.Option{httplimit.WithFormat(slerrors.JSONRPC), httplimit.WithJSONRPCCode(-32050), httplimit.WithJSONRPCCode(0)}, `"code":-32050`},
		{"WithFormat(JSONRPC), then Format(99)", []httplimit.Option{httplimit.WithFormat(slerrors.JSONRPC), httplimit.WithFormat(99)}, `"jsonrpc":"2.0","id":7`},
	} {
		h := httplimit.New(sluice.Deny, keys, c.opts...)(next)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`)))
		if !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s: body %s, want %s", c.name, rec.Body, c.want)
		}
	}
}
