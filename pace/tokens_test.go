package pace_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/stack"
)

// tpmStack holds 1000 tokens per minute for every upstream, on a clock
// that does not move, so what is left shows what was charged.
func tpmStack(t *testing.T) *stack.Stack {
	t.Helper()
	s, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "tpm", "dimensionKeys": ["upstream"],
	  "entries": [{"dimensions": {"upstream": "*"}, "tokens": [{"rate": 1000, "period": "minute"}]}]}]}`),
		stack.WithClock(newStepClock()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tokensLeft finds how many tokens the stack holds for keys, by asking for
// n and then n+1 and giving both back.
func tokensLeft(t *testing.T, s *stack.Stack, keys sluice.Keys) int {
	t.Helper()
	lo, hi := 0, 1001
	for lo+1 < hi { // largest n that is allowed
		mid := (lo + hi) / 2
		r, d, err := s.Reserve(context.Background(), keys, mid)
		if err != nil {
			t.Fatal(err)
		}
		r.Cancel()
		if d.Allowed {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func TestTokensSettledFromUsage(t *testing.T) {
	const (
		openAI = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hi"}}],
  "usage": {"prompt_tokens": 120, "completion_tokens": 130, "total_tokens": 250}}`
		openAIStream = "data: {\"choices\":[{\"delta\":{\"content\":\"h\"}}],\"usage\":null}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":210,\"total_tokens\":310}}\n\ndata: [DONE]\n\n"
		anthropic       = `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":70,"cache_creation_input_tokens":10,"cache_read_input_tokens":500,"output_tokens":20}}`
		anthropicStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":40,\"output_tokens\":1}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"usage\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":60}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	)
	for _, tc := range []struct {
		name   string
		status int
		body   string
		close  bool // close without reading to the end
		want   int  // tokens charged
	}{
		{"openai", 200, openAI, false, 250},
		{"openai stream", 200, openAIStream, false, 310},
		{"anthropic", 200, anthropic, false, 100},
		{"anthropic stream", 200, anthropicStream, false, 100},
		{"no usage keeps the estimate", 200, `{"ok":true}`, false, 300},
		{"unparseable keeps the estimate", 200, `{"usage": {"input_tokens": "many"`, false, 300},
		{"closed early keeps the estimate", 200, openAI, true, 300},
		{"failure gives it back", 500, openAI, false, 0},
		{"long stream: start and end kept", 200, strings.Replace(anthropicStream, "event: message_delta",
			strings.Repeat("event: ping\ndata: {\"type\": \"ping\"}\n\n", 20000)+"event: message_delta", 1), false, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tpmStack(t)
			up := &script{reply: func(int, *http.Request) *http.Response { return resp(tc.status, tc.body) }}
			tr := pace.New(up, pace.WithTokens(s, func(*http.Request) int { return 300 }))
			req, _ := http.NewRequest("POST", "https://api.test/v1/messages", strings.NewReader("{}"))
			res, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			keys := tr.DefaultKeys(req)
			if tc.status == 200 {
				if left := tokensLeft(t, s, keys); left != 700 {
					t.Fatalf("while the response is read, %d tokens left; want the estimate held (700)", left)
				}
			}
			if tc.close {
				if n, _ := res.Body.Read(make([]byte, 10)); n == 0 {
					t.Fatal("read nothing")
				}
			} else {
				got, _ := io.ReadAll(res.Body)
				if string(got) != tc.body {
					t.Fatalf("body changed: %q", got)
				}
			}
			res.Body.Close()
			if left := tokensLeft(t, s, keys); left != 1000-tc.want {
				t.Fatalf("%d tokens left, want %d charged", left, tc.want)
			}
		})
	}
}

// A request whose estimate does not fit waits for the tokens, within the
// maximum wait.
func TestTokensWait(t *testing.T) {
	clk := newStepClock()
	s, err := stack.Load([]byte(`{"rateLimits": [{"rateLimitId": "tpm", "dimensionKeys": ["upstream"],
	  "entries": [{"dimensions": {"upstream": "*"}, "tokens": [{"rate": 600, "period": "minute"}]}]}]}`), stack.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	up := &script{reply: func(int, *http.Request) *http.Response { return resp(200, "") }}
	tr := pace.New(up, pace.WithClock(clk), pace.WithTokens(s, func(*http.Request) int { return 400 }))
	for range 2 {
		res, err := get(t, tr, "https://api.test/")
		if err != nil || res.StatusCode != 200 {
			t.Fatal(res, err)
		}
	}
	// 600 per minute is 10 per second: the second 400 waits for 200 more.
	var total float64
	for _, d := range clk.Slept() {
		total += d.Seconds()
	}
	if total < 20 || total > 20.01 {
		t.Fatalf("waited %.3fs for tokens, want 20s", total)
	}
	// An estimate above the burst can never pass: a *WaitError at once.
	tr = pace.New(up, pace.WithClock(clk), pace.WithTokens(s, func(*http.Request) int { return 601 }))
	if _, err := get(t, tr, "https://api.test/"); err == nil {
		t.Fatal("an estimate above the burst was sent")
	}
}

func FuzzParseUsage(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`))
	f.Add([]byte(`data: {"usage":{"input_tokens":-5,"output_tokens":1e99}}` + "\n\n"))
	f.Add([]byte(`"usage" "usage": {"usage":{"output_tokens":3}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		u, ok := pace.ParseUsage(body)
		if u.Input < 0 || u.Output < 0 || u.Total < u.Input+u.Output || (!ok && u != (pace.Usage{})) {
			t.Fatalf("ParseUsage = %+v, %v", u, ok)
		}
	})
}

// failingReserver cannot decide: every call returns err.
type failingReserver struct{ err error }

func (f failingReserver) Allow(context.Context, sluice.Keys) (sluice.Decision, error) {
	return sluice.Decision{}, f.err
}

func (f failingReserver) Reserve(context.Context, sluice.Keys, int) (sluice.Reservation, sluice.Decision, error) {
	return sluice.NoReservation, sluice.Decision{}, f.err
}

// A Reserver that cannot decide refuses the request with its error and
// nothing is sent (CONVENTIONS item 5), and the error handler sees it.
func TestTokensReserverErrorRefuses(t *testing.T) {
	clk := newStepClock()
	up := &script{reply: func(int, *http.Request) *http.Response { return resp(200, "") }}
	var observed []error
	tr := pace.New(up, pace.WithClock(clk), pace.WithTokens(failingReserver{errors.New("redis: connection refused")}, nil),
		pace.WithErrorHandler(func(err error) { observed = append(observed, err) }))
	if _, err := get(t, tr, "https://api.test/"); err == nil || !strings.Contains(err.Error(), "connection refused") || up.count() != 0 {
		t.Fatalf("err %v, %d sent; want the reserver's error and nothing sent", err, up.count())
	}
	if len(observed) != 1 {
		t.Errorf("the error handler observed %v, want the reserver's error", observed)
	}
}
