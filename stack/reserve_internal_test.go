package stack

import (
	"testing"
	"time"
)

// Pools emptied by a release stay for reuse, but only until the next sweep:
// many values with one short request each do not accumulate pools.
func TestReleasedConnPoolsAreSwept(t *testing.T) {
	var tab connTable
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 10_000; i++ {
		key := []byte{byte(i), byte(i >> 8), 'k'}
		if ok, _ := tab.acquire(key, t0, uint64(i+1), 1, time.Minute); !ok {
			t.Fatalf("acquire %d refused", i)
		}
		tab.release(key, uint64(i+1))
	}
	if n := tab.len(); n > 2*connSweepMin {
		t.Errorf("%d pools kept after 10,000 released leases; want at most %d", n, 2*connSweepMin)
	}
	// A released pool is reused: the value's slot is free again.
	key := []byte("again")
	for i := uint64(1); i <= 3; i++ {
		if ok, _ := tab.acquire(key, t0, 100_000+i, 1, time.Minute); !ok {
			t.Fatalf("acquire %d after release refused", i)
		}
		if ok, _ := tab.acquire(key, t0, 200_000+i, 1, time.Minute); ok {
			t.Fatal("two slots of a limit of one")
		}
		tab.release(key, 100_000+i)
	}
}
