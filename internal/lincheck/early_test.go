package lincheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestEarlyHighHistories keeps histories of a Bucket that porcupine
// rejected, in about half the runs of TestLinearizableBuckets without the
// race detector, while the Spec raised H only at a take's linearization
// point (testdata/early/README.md). In each, a give-back overlaps a take
// at a later instant that has raised the Bucket's high-water instant
// before its compare-and-swap: the give-back sees that instant and returns
// less, and the take then finds the state the give-back left (a Remaining
// one lower than after an exact give-back). internal/bucket's
// TestGiveBackBesideTakeInFlight steps that interleaving. Checked with
// HighEarly, each history is linearizable; without, it is not, which shows
// what they hold.
func TestEarlyHighHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/early/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no histories in testdata/early: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			h, err := parseHistory(string(text))
			if err != nil {
				t.Fatal(err)
			}
			spec := targetSpec(1, bucketLoad.burst)
			spec.HighEarly = true
			if res, msg := check(t, spec, h, t.Name()); res != porcupine.Ok {
				t.Errorf("with HighEarly, the history is %s\n%s", res, msg)
			}
			if porcupine.CheckOperations(targetSpec(1, bucketLoad.burst).Model(), h) {
				t.Errorf("without HighEarly the history is linearizable: it no longer shows why a take's H is raised early")
			}
		})
	}
}
