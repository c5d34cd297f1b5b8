package lincheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// t0 is instant 0 of every history; an instant is a number of µs after it.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(us int64) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }

// us is the instant of t, in µs after t0.
func us(t time.Time) int64 { return t.Sub(t0).Microseconds() }

// recorder collects a history from many goroutines: each operation's call
// and return are numbered by one atomic counter, read just before the call
// and just after the return, so an operation that returned before another
// was called is ordered before it.
type recorder struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// client records the operations of one goroutine.
type client struct {
	r   *recorder
	id  int
	ops []porcupine.Operation
}

func (r *recorder) client(id int) *client { return &client{r: r, id: id} }

// do runs f, recording it as an operation with input in and f's output.
func (c *client) do(in any, f func() any) any {
	call := c.r.clock.Add(1)
	out := f()
	ret := c.r.clock.Add(1)
	c.ops = append(c.ops, porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret})
	return out
}

// done hands the client's operations to the recorder.
func (c *client) done() {
	c.r.mu.Lock()
	c.r.ops = append(c.r.ops, c.ops...)
	c.r.mu.Unlock()
}

func (r *recorder) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := slices.Clone(r.ops)
	slices.SortFunc(h, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	return h
}

// checkTimeout bounds one porcupine check. The histories are sized to be
// decided in well under a second; a check that runs out is logged and
// counted as passing (it found no violation), so a loaded CI machine
// cannot fail the suite on time alone.
const checkTimeout = 20 * time.Second

// check runs porcupine on h against spec and returns the result. On a
// violation it writes the visualization and the history to files in the
// test's output directory and names them in the error it returns.
func check(t testing.TB, spec *Spec, h []porcupine.Operation, name string) (porcupine.CheckResult, string) {
	t.Helper()
	model := spec.Model()
	res, info := porcupine.CheckOperationsVerbose(model, h, checkTimeout)
	if res == porcupine.Ok {
		return res, ""
	}
	if res == porcupine.Unknown {
		// Undecided within the timeout (a loaded machine): no violation
		// was found, as porcupine's doc allows reading it. Said, not failed.
		t.Logf("%s: porcupine did not decide %d operations within %v; counted as passing", name, len(h), checkTimeout)
		return porcupine.Ok, ""
	}
	dir := os.Getenv("LINCHECK_OUT")
	if dir == "" {
		dir = t.TempDir()
	}
	base := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name))
	_ = porcupine.VisualizePath(model, info, base+".html")
	report := dumpHistory(h)
	_ = os.WriteFile(base+".txt", []byte(report+"\n"+longest(spec, info)), 0o644)
	return res, fmt.Sprintf("%s: %s (%d operations; history in %s.txt, visualization in %s.html)\n%s",
		name, res, len(h), base, base, tail(longest(spec, info), 40))
}

// longest renders the longest linearizable prefix porcupine found, with the
// specification's states along it: where it stops is where the history
// leaves the specification.
func longest(spec *Spec, info porcupine.LinearizationInfo) string {
	var best []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, l := range part {
			if len(l) > len(best) {
				best = l
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "longest linearizable prefix (%d operations), with the states after each:\n", len(best))
	states := []State{spec.Init()}
	for _, op := range best {
		var next []State
		for _, st := range states {
			for _, n := range spec.Step(st, op.Input, op.Output) {
				if !slices.ContainsFunc(next, n.equal) {
					next = append(next, n)
				}
			}
		}
		states = next
		fmt.Fprintf(&sb, "c%d [%d,%d] %s\n", op.ClientId, op.Call, op.Return, Describe(op.Input, op.Output))
		for _, st := range states {
			fmt.Fprintf(&sb, "    %s\n", st)
		}
	}
	return sb.String()
}

// dumpHistory renders h, one operation a line, in call order.
func dumpHistory(h []porcupine.Operation) string {
	var sb strings.Builder
	for _, op := range h {
		fmt.Fprintf(&sb, "c%d [%d,%d] %s\n", op.ClientId, op.Call, op.Return, Describe(op.Input, op.Output))
	}
	return sb.String()
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = append([]string{fmt.Sprintf("… %d earlier operations", len(l)-lines)}, l[len(l)-lines:]...)
	}
	return strings.Join(l, "\n")
}

// checkOutputs fails the test for every operation that returned an error
// (as a string): a give-back refused, a decision that could not be made.
func checkOutputs(t testing.TB, h []porcupine.Operation) {
	t.Helper()
	for _, op := range h {
		if msg, ok := op.Output.(string); ok {
			t.Errorf("%s: %s", Describe(op.Input, nil), msg)
		}
	}
}
