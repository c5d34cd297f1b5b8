package bucket

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// A Table dropped while holding buckets gives them back to its Budget.
//
// The release runs in a runtime cleanup of the Table, which the collector
// schedules when it likes. The test waits for an event instead of for
// time: the Table's account is passed to that cleanup, so it can only be
// collected after the cleanup ran, and a cleanup of the test on the
// account reports when it is. A goroutine drives the collector until then.
func TestBudgetReleasedWhenTableDropped(t *testing.T) {
	bud := NewBudget(1000)
	released := make(chan struct{})
	func() {
		tab := NewTable(1, 5, WithBudget(bud))
		for i := range 300 {
			tab.TakeN(diffT0, strconv.Itoa(i), 1)
		}
		if bud.Len() != 300 {
			t.Fatalf("Budget Len = %d, want 300", bud.Len())
		}
		runtime.AddCleanup(tab.acct, func(c chan struct{}) { close(c) }, released)
	}()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-released:
				return
			case <-done:
				return
			default:
				runtime.GC()
			}
		}
	}()
	select {
	case <-released:
	case <-time.After(time.Minute): // a deadline for a hang, not a wait for time
		t.Fatal("the dropped Table's account was never collected")
	}
	if bud.Len() != 0 {
		t.Fatalf("Budget Len = %d after its only Table was collected, want 0", bud.Len())
	}
}
