package pace

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/sluicehq/sluice"
)

// How much of a response body is kept to find its usage: the start (where
// Anthropic's stream reports input tokens) and the end (where OpenAI and
// Anthropic report the rest).
const (
	usageHead = 16 << 10
	usageTail = 64 << 10
)

// usage is the token usage a response reports.
type usage struct {
	// Input and Output are the input (prompt, including tokens written to
	// a cache) and output (completion) tokens.
	Input, Output int64
	// Total is the total the response states, or Input+Output if larger.
	Total int64
}

// parseUsage finds the usage objects in an LLM API response body, JSON or a
// stream of server-sent events, and combines them: OpenAI's prompt_tokens,
// completion_tokens and total_tokens, Anthropic's input_tokens,
// cache_creation_input_tokens and output_tokens (a stream reports input
// tokens at its start and cumulative output tokens in later events, so
// each is the largest seen). It reports false when it found none.
// Negative or absurd counts are ignored.
func parseUsage(body []byte) (usage, bool) {
	var u usage
	found := false
	key := []byte(`"usage"`)
	for rest := body; ; {
		i := bytes.Index(rest, key)
		if i < 0 {
			break
		}
		rest = rest[i+len(key):]
		j := 0
		for j < len(rest) && (rest[j] == ' ' || rest[j] == '\t' || rest[j] == '\r' || rest[j] == '\n' || rest[j] == ':') {
			j++
		}
		if j >= len(rest) || rest[j] != '{' {
			continue
		}
		var v struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			TotalTokens         int64 `json:"total_tokens"`
			InputTokens         int64 `json:"input_tokens"`
			CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
			OutputTokens        int64 `json:"output_tokens"`
		}
		if err := json.NewDecoder(bytes.NewReader(rest[j:])).Decode(&v); err != nil {
			continue
		}
		ok := func(n int64) int64 {
			if n < 0 || n > maxQuota {
				return 0
			}
			return n
		}
		in := max(ok(v.PromptTokens), ok(v.InputTokens)+ok(v.CacheCreationTokens))
		out := max(ok(v.CompletionTokens), ok(v.OutputTokens))
		u.Input, u.Output = max(u.Input, in), max(u.Output, out)
		u.Total = max(u.Total, ok(v.TotalTokens))
		found = true
	}
	u.Total = max(u.Total, u.Input+u.Output)
	return u, found
}

// usageBody passes a response body through unchanged, keeping its start
// and end, and settles the token reservation from the usage they report
// when the body ends or is closed, whichever comes first.
type usageBody struct {
	rc       io.ReadCloser
	res      sluice.Reservation
	estimate int

	mu      sync.Mutex
	head    []byte
	tail    []byte
	dropped bool // bytes between head and tail were let go
	settled bool
}

func newUsageBody(rc io.ReadCloser, res sluice.Reservation, estimate int) io.ReadCloser {
	return &usageBody{rc: rc, res: res, estimate: estimate}
}

func (b *usageBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > 0 && !b.settled {
		b.keep(p[:n])
	}
	if err == io.EOF {
		b.settle()
	}
	return n, err
}

func (b *usageBody) keep(p []byte) {
	if len(b.head) < usageHead {
		k := min(usageHead-len(b.head), len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > 2*usageTail {
		n := copy(b.tail, b.tail[len(b.tail)-usageTail:])
		b.tail = b.tail[:n]
		b.dropped = true
	}
}

func (b *usageBody) Close() error {
	err := b.rc.Close()
	b.mu.Lock()
	b.settle()
	b.mu.Unlock()
	return err
}

// settle reconciles the reservation with the usage found, or with the
// estimate when there is none; b.mu is held.
func (b *usageBody) settle() {
	if b.settled {
		return
	}
	b.settled = true
	var (
		u     usage
		found bool
	)
	if b.dropped {
		uh, fh := parseUsage(b.head)
		ut, ft := parseUsage(b.tail)
		found = fh || ft
		u.Input, u.Output = max(uh.Input, ut.Input), max(uh.Output, ut.Output)
		u.Total = max(uh.Total, ut.Total, u.Input+u.Output)
	} else {
		u, found = parseUsage(append(b.head, b.tail...))
	}
	b.head, b.tail = nil, nil
	actual := b.estimate
	if found {
		actual = int(u.Total)
	}
	_ = b.res.Reconcile(actual)
}
