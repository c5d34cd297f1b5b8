package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bucket"
	"golang.org/x/time/rate"
)

func TestTableKeysAreIndependent(t *testing.T) {
	tab := bucket.NewTable(1, 2)
	for i, c := range []struct {
		key string
		at  time.Duration
		ok  bool
	}{
		{"a", 0, true}, {"a", 0, true}, {"a", 0, false},
		{"b", 0, true}, {"b", 0, true}, {"b", 0, false},
		{"a", time.Second, true}, {"a", time.Second, false},
	} {
		if got := tab.AllowN(at(c.at), c.key, 1); got != c.ok {
			t.Fatalf("step %d: AllowN(%q, t0+%v) = %v, want %v", i, c.key, c.at, got, c.ok)
		}
	}
	if r := tab.TakeBytes(at(0), []byte("b"), 1); r.OK || r.RetryAfter != time.Second {
		t.Fatalf("TakeBytes on exhausted b: %+v", r)
	}
	if got := tab.TokensAt(at(0), "b"); got != 0 {
		t.Fatalf("b exhausted: %v tokens, want 0", got)
	}
	tab.ChargeBytes(at(0), []byte("c"), 5)
	tab.ChargeN(at(0), "d", 3)
	if got := tab.TokensAt(at(0), "c"); got != -3 {
		t.Fatalf("c after charge 5: %v tokens, want -3", got)
	}
	if got := tab.TokensAt(at(0), "d"); got != -1 {
		t.Fatalf("d after charge 3: %v tokens, want -1", got)
	}
	if got := tab.TokensAt(at(0), "never"); got != 2 {
		t.Fatalf("unknown key: %v tokens, want the burst 2", got)
	}
	if r := tab.TakeN(at(0), "e", 3); !r.OverBurst || r.OK {
		t.Fatalf("over burst on a new key: %+v", r)
	}
	if r := tab.TakeBytes(at(0), []byte("e"), 0); !r.OK || r.Remaining != 2 {
		t.Fatalf("n=0 on a new key: %+v", r)
	}
	if tab.Len() != 4 {
		t.Fatalf("Len = %d, want 4 (a b c d; e was only peeked)", tab.Len())
	}
	if tab.Limit() != 1 || tab.Burst() != 2 {
		t.Fatalf("Limit, Burst = %v, %v", tab.Limit(), tab.Burst())
	}
}

func TestTableInfAndZero(t *testing.T) {
	inf := bucket.NewTable(rate.Inf, 0)
	for i := 0; i < 3; i++ {
		if !inf.AllowN(at(0), "k", 100) || !inf.TakeBytes(at(0), []byte("k"), 1).OK {
			t.Fatal("Inf table denied")
		}
	}
	inf.ChargeN(at(0), "k", 5)
	inf.ChargeBytes(at(0), []byte("k"), 5)
	if inf.Len() != 0 {
		t.Fatalf("Inf table holds %d keys", inf.Len())
	}
	zero := bucket.NewTable(0, 1, bucket.WithShards(1))
	if !zero.AllowN(at(0), "k", 1) || zero.AllowN(at(time.Hour), "k", 1) {
		t.Fatal("rate 0 table: want one grant then nothing")
	}
	if r := zero.TakeN(at(time.Hour), "k", 1); !r.Permanent {
		t.Fatalf("rate 0 exhausted: %+v, want Permanent", r)
	}
}

func TestTableReconfigureKeepsTokens(t *testing.T) {
	tab := bucket.NewTable(10, 10)
	tab.TakeN(at(0), "a", 6)    // 4 left
	tab.ChargeN(at(0), "b", 13) // -3
	tab.Reconfigure(at(0), 1, 5)
	if got := tab.TokensAt(at(0), "a"); got != 4 {
		t.Fatalf("a: %v tokens, want 4", got)
	}
	if got := tab.TokensAt(at(0), "b"); got != -3 {
		t.Fatalf("b: %v tokens, want -3", got)
	}
	if got := tab.TokensAt(at(10*time.Second), "a"); got != 5 {
		t.Fatalf("a 10s later at 1/s: %v, want capped 5", got)
	}
	tab.Reconfigure(at(0), 1, 2)
	if got := tab.TokensAt(at(0), "a"); got != 2 {
		t.Fatalf("a after shrinking burst: %v, want 2", got)
	}
	if tab.Limit() != 1 || tab.Burst() != 2 {
		t.Fatalf("Limit, Burst = %v, %v", tab.Limit(), tab.Burst())
	}
}

// Few keys, many goroutines, concurrent Reconfigure to the same parameters:
// each key's window bound holds.
func TestTableConcurrentWindowBound(t *testing.T) {
	const r, burst = 1000, 5
	tab := bucket.NewTable(r, burst, bucket.WithShards(2))
	keys := []string{"x", "y", "z"}
	var mu sync.Mutex
	grants := map[string][]grant{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			local := map[string][]grant{}
			ns := int64(0)
			for i := 0; i < 1500; i++ {
				ns += int64(rng.IntN(int(3 * time.Millisecond)))
				now := t0.Add(time.Duration(ns))
				key := keys[rng.IntN(len(keys))]
				var ok bool
				if i%2 == 0 {
					ok = tab.TakeN(now, key, 1).OK
				} else {
					ok = tab.TakeBytes(now, []byte(key), 1).OK
				}
				if ok {
					local[key] = append(local[key], grant{now, 1})
				}
				if w == 0 && i%100 == 0 {
					tab.Reconfigure(now, r, burst)
				}
			}
			mu.Lock()
			for k, g := range local {
				grants[k] = append(grants[k], g...)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, k := range keys {
		if len(grants[k]) < 100 {
			t.Fatalf("key %s: only %d grants", k, len(grants[k]))
		}
		checkWindows(t, grants[k], r, burst, 0)
	}
}

// A million distinct keys over simulated time, each used once: old keys
// refill and are reclaimed, so live keys and heap stay bounded.
func TestTableBoundedMemory(t *testing.T) {
	const keys = 1_000_000
	n := keys
	if testing.Short() || raceEnabled {
		n = keys / 10
	}
	tab := bucket.NewTable(10, 5) // a used key is full again 100 ms later
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	maxLen := 0
	buf := make([]byte, 0, 32)
	for i := 0; i < n; i++ {
		now := at(time.Duration(i) * 10 * time.Microsecond) // 100,000 new keys per simulated second
		buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
		if !tab.TakeBytes(now, buf, 1).OK {
			t.Fatalf("new key %d denied", i)
		}
		if i%10000 == 0 {
			maxLen = max(maxLen, tab.Len())
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap := int64(ms.HeapAlloc) - int64(base)
	// 1.1 s of keys (110,000) are not yet full or within the one-second
	// reclaim grace; sweeps run when a shard doubles, so at most a few
	// times that many are live.
	if maxLen > 330_000 {
		t.Fatalf("live keys reached %d of %d inserted: not reclaimed", maxLen, n)
	}
	if heap > 32<<20 {
		t.Fatalf("heap grew by %d MiB for %d keys inserted, %d live", heap>>20, n, tab.Len())
	}
	t.Logf("%d keys inserted, max live %d, final live %d, heap +%d KiB", n, maxLen, tab.Len(), heap>>10)
}

// A reclaimed key's new bucket gives a stale caller no more than the old one.
func TestTableReclaimIsConservative(t *testing.T) {
	tab := bucket.NewTable(1, 2, bucket.WithShards(1))
	tab.TakeN(at(0), "old", 2)
	// Fill the shard so that sweeps run, far later: "old" is full again.
	for i := 0; i < 1000; i++ {
		tab.TakeN(at(time.Hour), fmt.Sprint("k", i), 1)
	}
	if got := tab.TokensAt(at(time.Second), "old"); got > 1 {
		t.Fatalf("stale view of a reclaimed key: %v tokens, the old bucket held 1", got)
	}
	if got := tab.TokensAt(at(time.Hour), "old"); got != 2 {
		t.Fatalf("reclaimed key now: %v tokens, want full 2", got)
	}
	if tab.Len() != 1000 {
		t.Fatalf("Len = %d, want the 1000 live keys (old reclaimed)", tab.Len())
	}
}
