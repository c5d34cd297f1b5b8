package match_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/match"
)

func problems(n int) *match.ConfigError {
	var e match.ConfigError
	for i := range n {
		e.Add(fmt.Sprintf("entries[%d]", i), "problem %d", i)
	}
	return &e
}

// The expected messages below are written for MaxProblems = 2,000 and
// ErrorProblems = 20.
func TestConfigErrorMessage(t *testing.T) {
	if match.MaxProblems != 2000 || match.ErrorProblems != 20 {
		t.Fatalf("MaxProblems %d, ErrorProblems %d: update the expected messages", match.MaxProblems, match.ErrorProblems)
	}
	for _, c := range []struct {
		n         int
		head      string
		spelled   int
		tail      string
		omitted   int
		nRecorded int
	}{
		{n: 1, head: "invalid rate limit configuration: entries[0]: problem 0", spelled: 1},
		{n: 2, head: "invalid rate limit configuration: 2 problems:\n\t", spelled: 2},
		{n: match.ErrorProblems, head: fmt.Sprintf("invalid rate limit configuration: %d problems:\n\t", match.ErrorProblems), spelled: match.ErrorProblems},
		{n: match.ErrorProblems + 1, head: fmt.Sprintf("invalid rate limit configuration: %d problems:\n\t", match.ErrorProblems+1), spelled: match.ErrorProblems, tail: "\n\t… and 1 more problem"},
		{n: 1234, head: "invalid rate limit configuration: 1,234 problems:\n\t", spelled: match.ErrorProblems, tail: fmt.Sprintf("\n\t… and 1,%03d more problems", 234-match.ErrorProblems)},
		{n: match.MaxProblems + 5, head: "invalid rate limit configuration: 2,005 problems:\n\t", spelled: match.ErrorProblems, omitted: 5},
	} {
		e := problems(c.n)
		msg := e.Error()
		if !strings.HasPrefix(msg, c.head) {
			t.Errorf("%d problems: message starts %q, want %q", c.n, msg[:min(len(msg), 80)], c.head)
		}
		if c.tail != "" && !strings.HasSuffix(msg, c.tail) {
			t.Errorf("%d problems: message ends %q, want %q", c.n, msg[max(0, len(msg)-40):], c.tail)
		}
		if c.tail == "" && c.omitted == 0 && strings.Contains(msg, "more problem") {
			t.Errorf("%d problems: message counts more problems than it has:\n%s", c.n, msg)
		}
		if got := strings.Count(msg, "entries["); got != c.spelled {
			t.Errorf("%d problems: message spells out %d, want %d", c.n, got, c.spelled)
		}
		if e.Count() != c.n || e.Omitted != c.omitted || len(e.Problems) != c.n-c.omitted {
			t.Errorf("%d problems: Count %d, Omitted %d, recorded %d", c.n, e.Count(), e.Omitted, len(e.Problems))
		}
		if e.Err() == nil {
			t.Errorf("%d problems: Err() = nil", c.n)
		}
	}
	if err := problems(0).Err(); err != nil {
		t.Errorf("no problems: Err() = %v, want nil", err)
	}
}

// Problems beyond MaxProblems are counted, not recorded, and the count
// survives into the message with thousands separators.
func TestConfigErrorBoundsItsList(t *testing.T) {
	e := problems(match.MaxProblems + 100_000)
	if len(e.Problems) != match.MaxProblems || cap(e.Problems) > 2*match.MaxProblems {
		t.Errorf("recorded %d problems (capacity %d), want %d", len(e.Problems), cap(e.Problems), match.MaxProblems)
	}
	if e.Problems[match.MaxProblems-1].Path != fmt.Sprintf("entries[%d]", match.MaxProblems-1) {
		t.Errorf("last recorded problem is %v, want the %dth found", e.Problems[match.MaxProblems-1], match.MaxProblems)
	}
	msg := e.Error()
	want := "\n\t… and 101,980 more problems" // 100,000 + MaxProblems - ErrorProblems
	if !strings.HasSuffix(msg, want) || len(msg) > 2048 {
		t.Errorf("message (%d bytes) ends %q, want %q", len(msg), msg[max(0, len(msg)-40):], want)
	}
}
