package stack

import (
	"testing"
	"time"
)

// Pools of values whose leases were never released, or that were refused,
// do not accumulate.
func TestConnTableDoesNotLeak(t *testing.T) {
	var tab connTable
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := time.Minute
	for i := 0; i < 10_000; i++ {
		key := []byte{byte(i), byte(i >> 8), 'k'}
		at := t0.Add(time.Duration(i) * time.Second) // each lease expires 60 keys later
		if ok, _ := tab.acquire(key, at, uint64(i+1), 1, ttl); !ok {
			t.Fatalf("acquire %d refused", i)
		}
	}
	if n := tab.len(); n > 1000 {
		t.Errorf("%d pools live after 10,000 abandoned leases of 1 minute over 10,000 s; want them reclaimed", n)
	}
	// A refused acquire (limit 0) leaves nothing behind.
	var zero connTable
	for i := 0; i < 100; i++ {
		if ok, _ := zero.acquire([]byte{byte(i)}, t0, uint64(i+1), 0, ttl); ok {
			t.Fatal("limit 0 admitted")
		}
	}
	if n := zero.len(); n != 0 {
		t.Errorf("%d pools kept for refused acquires", n)
	}
}
