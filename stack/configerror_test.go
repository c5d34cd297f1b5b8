package stack_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/match"
	"github.com/sluicehq/sluice/stack"
)

// Users of stack find the configuration error in stack: every entry point
// that validates returns a *stack.ConfigError with the problem's path.
func TestConfigErrorIsFoundInStack(t *testing.T) {
	good := stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 1, Period: stack.Second}}}},
	}}}
	bad := stack.Config{RateLimits: []stack.RateLimit{{
		RateLimitID: "per-caller", DimensionKeys: []string{"caller"},
		Entries: []stack.Entry{{Dimensions: map[string]string{"caller": "*"}, Requests: []stack.Rate{{Rate: 1, Period: "week"}}}},
	}}}
	badJSON := []byte(`{"rateLimits": [{"rateLimitId": "per-caller", "dimensionKeys": ["caller"],
	  "entries": [{"dimensions": {"caller": "*"}, "requests": [{"rate": 1, "period": "week"}]}]}]}`)
	s, err := stack.New(good)
	if err != nil {
		t.Fatal(err)
	}
	_, errNew := stack.New(bad)
	_, errLoad := stack.Load(badJSON)
	_, errParse := stack.Parse(badJSON)
	for name, err := range map[string]error{
		"New":        errNew,
		"Load":       errLoad,
		"Parse":      errParse,
		"Validate":   bad.Validate(),
		"Reload":     s.Reload(bad),
		"ReloadJSON": s.ReloadJSON(badJSON),
	} {
		var ce *stack.ConfigError
		if !errors.As(fmt.Errorf("wrapped: %w", err), &ce) {
			t.Errorf("%s: %v is not a *stack.ConfigError", name, err)
			continue
		}
		want := []stack.Problem{{Path: "rateLimits[0].entries[0].requests[0].period", Message: `"week" must be "second", "minute", "hour" or "day"`}}
		if ce.Count() != 1 || len(ce.Problems) != 1 || ce.Problems[0] != want[0] {
			t.Errorf("%s: problems %v (count %d), want %v", name, ce.Problems, ce.Count(), want)
		}
		// The alias is the match type: code that already looks for
		// *match.ConfigError keeps finding it.
		var me *match.ConfigError
		if !errors.As(err, &me) || me != ce {
			t.Errorf("%s: errors.As(*match.ConfigError) = %v, want the same error", name, me)
		}
	}
}

// manyMistakes is a configuration of 50 limits with 1,000 entries each, every
// entry with an empty dimension value: 50,000 problems.
func manyMistakes() []byte {
	var b strings.Builder
	b.WriteString(`{"rateLimits": [`)
	for i := range stack.MaxRateLimits {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"rateLimitId": "limit-%d", "dimensionKeys": ["caller"], "entries": [`, i)
		for j := range match.MaxEntries {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"dimensions": {"caller": ""}, "requests": [{"rate": 1, "period": "second"}]}`)
		}
		b.WriteString("]}")
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// A configuration with a mistake in every one of its 50,000 entries yields
// an error message of a few KB, not 13 MB: the first problems and a count.
// The recorded list is bounded too, and the count covers every problem.
func TestConfigErrorWithThousandsOfProblemsStaysSmall(t *testing.T) {
	const total = 50 * 1000
	_, err := stack.Load(manyMistakes())
	var ce *stack.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Load = %v, want a *stack.ConfigError", err)
	}
	if got := ce.Count(); got != total {
		t.Errorf("Count = %d, want %d", got, total)
	}
	if len(ce.Problems) != maxProblems || ce.Omitted != total-maxProblems {
		t.Errorf("recorded %d problems and omitted %d, want %d and %d", len(ce.Problems), ce.Omitted, maxProblems, total-maxProblems)
	}
	// The recorded problems are the first ones, in order.
	for _, i := range []int{0, 999, 1000, maxProblems - 1} {
		want := fmt.Sprintf("rateLimits[%d].entries[%d].dimensions.caller", i/1000, i%1000)
		if p := ce.Problems[i]; p.Path != want || !strings.HasPrefix(p.Message, "empty value") {
			t.Errorf("Problems[%d] = %v, want an empty value at %s", i, p, want)
		}
	}
	msg := err.Error()
	if len(msg) > 4096 {
		t.Errorf("error message is %d bytes, want at most 4 KB", len(msg))
	}
	if !strings.HasPrefix(msg, "invalid rate limit configuration: 50,000 problems:\n\t") {
		t.Errorf("message does not start with the count:\n%s", msg)
	}
	if want := "\n\t… and 49,980 more problems"; !strings.HasSuffix(msg, want) {
		t.Errorf("message does not end with %q:\n%s", want, msg)
	}
	if got := strings.Count(msg, "\n\trateLimits["); got != errorProblems {
		t.Errorf("message spells out %d problems, want %d", got, errorProblems)
	}
	for i := range errorProblems {
		if p := "\n\trateLimits[0].entries[" + strconv.Itoa(i) + "].dimensions.caller: empty value"; !strings.Contains(msg, p) {
			t.Errorf("message lacks problem %d:\n%s", i, msg)
		}
	}
}

// The same bound holds for the same mistakes in a Config built in Go.
func TestConfigErrorBoundForGoConfig(t *testing.T) {
	var cfg stack.Config
	for i := range stack.MaxRateLimits {
		rl := stack.RateLimit{RateLimitID: "limit-" + strconv.Itoa(i), DimensionKeys: []string{"caller"}}
		for range match.MaxEntries {
			rl.Entries = append(rl.Entries, stack.Entry{Dimensions: map[string]string{"caller": ""}, Requests: []stack.Rate{{Rate: 1, Period: stack.Second}}})
		}
		cfg.RateLimits = append(cfg.RateLimits, rl)
	}
	_, err := stack.New(cfg)
	var ce *stack.ConfigError
	if !errors.As(err, &ce) || ce.Count() != 50_000 || len(ce.Problems) != maxProblems {
		t.Fatalf("New = %.200v, want a *stack.ConfigError counting 50,000 problems", err)
	}
	if n := len(err.Error()); n > 4096 {
		t.Errorf("error message is %d bytes, want at most 4 KB", n)
	}
}

// The bounds of a match.ConfigError (unexported there): the problems it
// records, and the problems its message spells out.
const (
	maxProblems   = 2000
	errorProblems = 20
)
