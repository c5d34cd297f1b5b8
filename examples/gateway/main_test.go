package main

import (
	"strings"
	"testing"
)

// The demo's printed decisions follow from the configuration: checked line
// by line so a change in matching or stacking shows up here.
func TestDemo(t *testing.T) {
	var b strings.Builder
	if err := run(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	mustCount := func(sub string, n int) {
		t.Helper()
		if got := strings.Count(out, sub); got != n {
			t.Errorf("%q appears %d times, want %d", sub, got, n)
		}
	}
	mustCount("alice my-target  readData   allowed", 5)
	mustCount("THROTTLED  per-tool/targetName=my-target,toolName=readData (entry my-target,readData)", 2)
	mustCount("alice my-target  writeData  THROTTLED  per-target-rps/targetName=my-target", 1)
	mustCount("bob   other      readData   allowed", 1)
	mustCount("bob   other      readData   THROTTLED  per-tool/targetName=other,toolName=readData (entry *,*)", 2)
	mustCount("THROTTLED  per-caller-rpm/$.context.jwt.sub=bob", 1)
	// Retry-after is shown to the millisecond: 14s, not 13.999999995s.
	mustCount("(entry *), retry after 14s\n", 1)
	mustCount("retry after 200ms\n", 3)
	mustCount("99999", 0)
}
