package bucket_test

import (
	"testing"

	"github.com/sluicehq/sluice/bucket"
)

// TestPublicTakesDoNotAllocate: the wrappers add no allocation to the
// takes of a Bucket or of a Table key that has a bucket.
func TestPublicTakesDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := bucket.New(1e8, 1<<30)
	tab := bucket.NewTable(1e8, 1<<30)
	tab.Allow("k")
	for name, f := range map[string]func(){
		"Bucket.Allow":    func() { b.Allow() },
		"Bucket.AllowN":   func() { b.AllowN(2) },
		"Bucket.AllowAt":  func() { b.AllowAt(t0, 1) },
		"Bucket.TakeN":    func() { b.TakeN(1) },
		"Bucket.TakeAt":   func() { r := b.TakeAt(t0, 1); _ = b.GiveBack(&r.Grant, 1) },
		"Table.Allow":     func() { tab.Allow("k") },
		"Table.AllowAt":   func() { tab.AllowAt(t0, "k", 1) },
		"Table.TakeN":     func() { tab.TakeN("k", 1) },
		"Table.TakeAt":    func() { r := tab.TakeAt(t0, "k", 1); _ = tab.GiveBack("k", &r.Grant, 1) },
		"Table.TokensAt":  func() { tab.TokensAt(t0, "k") },
		"Bucket.TokensAt": func() { b.TokensAt(t0) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s: %v allocations, want 0", name, a)
		}
	}
}
