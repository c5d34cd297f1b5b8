package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	antoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"

	"github.com/sluicehq/sluice/pace"
)

// Issue #41, item 8: the official SDKs through pace.New against an
// upstream of burst 20 and 1 request a second whose headers state 60 a
// minute. 80 calls from 16 goroutines cannot end before 60 s (20 at once,
// then one a second); paced from the headers alone they end within a
// second of it, with no 429. Time is the simulated clock of vclock.
const (
	floorBurst    = 20
	floorInterval = time.Second
	floorCalls    = 80
	floorWorkers  = 16
	floorTime     = (floorCalls - floorBurst) * floorInterval
)

// floorUpstream is that upstream: a bucket of 20 refilled at 1 a second on
// clk, answering in the dialect of header (OpenAI or Anthropic) with a
// limit of 60, the whole requests left and when the bucket is full, and a
// 429 with retry-after-ms beyond.
type floorUpstream struct {
	clk    *vclock
	header func(h http.Header, remaining int64, full time.Time)
	body   string

	mu        sync.Mutex
	start     time.Time
	tat       time.Time
	ok, t429  atomic.Int64
	lastServe atomic.Int64 // ns after start
}

func (f *floorUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := f.clk.Now()
	f.mu.Lock()
	tat := f.tat
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(floorInterval)
	ok := next.Sub(now) <= floorBurst*floorInterval
	if ok {
		f.tat = next
		tat = next
	}
	f.mu.Unlock()
	left := int64((floorBurst*floorInterval - tat.Sub(now)) / floorInterval)
	f.header(w.Header(), left, tat)
	if !ok {
		f.t429.Add(1)
		w.Header().Set("Retry-After-Ms", "1000")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"type":"rate_limit_error","message":"Rate limit exceeded"}}`)
		return
	}
	f.ok.Add(1)
	f.lastServe.Store(int64(now.Sub(f.start)))
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, f.body)
}

func openAIHeaders(h http.Header, remaining int64, full time.Time) {
	h.Set("X-Ratelimit-Limit-Requests", "60")
	h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(remaining, 10))
	h.Set("X-Ratelimit-Reset-Requests", "1s")
}

func anthropicHeaders(h http.Header, remaining int64, full time.Time) {
	h.Set("Anthropic-Ratelimit-Requests-Limit", "60")
	h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.FormatInt(remaining, 10))
	h.Set("Anthropic-Ratelimit-Requests-Reset", full.UTC().Format(time.RFC3339))
}

// runFloor serves u, has 16 goroutines make 80 calls with call, and
// checks what the upstream saw.
func runFloor(t *testing.T, clk *vclock, u *floorUpstream, call func(ctx context.Context, c *http.Client, url string) error) {
	t.Helper()
	u.start, u.tat = clk.Now(), clk.Now()
	srv := httptest.NewServer(u)
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: floorWorkers}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: pace.New(base, pace.WithClock(clk), pace.WithMaxWait(10*time.Minute))}
	var left, errs atomic.Int64
	var firstErr atomic.Pointer[error]
	left.Store(floorCalls)
	clk.Go(func() {
		for range floorWorkers {
			clk.Go(func() {
				for left.Add(-1) >= 0 {
					if err := call(context.Background(), client, srv.URL); err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, &err)
					}
				}
			})
		}
	})
	clk.Wait()
	elapsed := time.Duration(u.lastServe.Load())
	t.Logf("%d served, %d 429s, %d errors, the last at +%v on the simulated clock (floor %v)",
		u.ok.Load(), u.t429.Load(), errs.Load(), elapsed, floorTime)
	if n := u.t429.Load(); n != 0 {
		t.Errorf("%d 429s, want 0", n)
	}
	if errs.Load() != 0 || u.ok.Load() != floorCalls {
		t.Errorf("%d served and %d errors (the first: %v), want %d served", u.ok.Load(), errs.Load(), errOf(firstErr.Load()), floorCalls)
	}
	if elapsed < floorTime || elapsed > floorTime+time.Second {
		t.Errorf("the last call was served at +%v, want within 1 s of the floor %v", elapsed, floorTime)
	}
}

func TestOpenAISDKAtTheFloor(t *testing.T) {
	for round := range 3 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			clk := newVClock(sdkStart())
			u := &floorUpstream{clk: clk, header: openAIHeaders,
				body: `{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`}
			runFloor(t, clk, u, func(ctx context.Context, c *http.Client, url string) error {
				oai := openai.NewClient(oaioption.WithHTTPClient(c), oaioption.WithBaseURL(url+"/v1"),
					oaioption.WithAPIKey("sk-test"), oaioption.WithMaxRetries(0))
				_, err := oai.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
					Model:    "gpt-4o-mini",
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				})
				return err
			})
		})
	}
}

func TestAnthropicSDKAtTheFloor(t *testing.T) {
	for round := range 3 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			clk := newVClock(sdkStart())
			u := &floorUpstream{clk: clk, header: anthropicHeaders,
				body: `{"id":"msg","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`}
			runFloor(t, clk, u, func(ctx context.Context, c *http.Client, url string) error {
				claude := anthropic.NewClient(antoption.WithHTTPClient(c), antoption.WithBaseURL(url),
					antoption.WithAPIKey("k"), antoption.WithMaxRetries(0))
				_, err := claude.Messages.New(ctx, anthropic.MessageNewParams{
					Model:     "claude-3-5-haiku-latest",
					MaxTokens: 16,
					Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
				})
				return err
			})
		})
	}
}

// sdkStart is the simulated clock's start: the present, because the
// Anthropic SDK gives each call a deadline on the real clock (its default
// timeout), which pace compares with its own.
func sdkStart() time.Time { return time.Now().Round(0) }

func errOf(p *error) error {
	if p == nil {
		return nil
	}
	return *p
}
