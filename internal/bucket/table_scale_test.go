package bucket_test

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bucket"
	"golang.org/x/time/rate"
)

// liveHeap is the live heap after a full GC.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// fillKeys inserts n keys of keyLen bytes (distinct by their first 8 bytes)
// into tab at t0, each taking one token, from one reused buffer, so that only
// the Table's own memory grows.
func fillKeys(t *testing.T, tab *bucket.Table, n, keyLen int) {
	t.Helper()
	buf := make([]byte, keyLen)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	for i := range n {
		binary.LittleEndian.PutUint64(buf, uint64(i))
		if !tab.TakeBytes(t0, buf, 1).OK {
			t.Fatalf("key %d denied", i)
		}
	}
}

// A live bucket costs the same whatever the length of its key: the Table
// stores a digest, never the key. 100,000 keys of 10 KB (1 GB of keys) hold
// at most 64 bytes per bucket plus a fixed overhead, the same as 10-byte
// keys.
func TestTableMemoryIndependentOfKeyLength(t *testing.T) {
	n := 100_000
	if raceEnabled {
		n = 20_000
	}
	perKey := map[int]float64{}
	for _, keyLen := range []int{10, 10 << 10} {
		// A live bucket holds at least 16 B: a smaller growth means that
		// something else was freed between the two readings (a cleanup of
		// an earlier test's Table, run by the collector), so the reading is
		// taken again, up to three times.
		var grown int64
		for try := 0; try < 3 && grown < int64(16*n); try++ {
			before := liveHeap()
			tab := bucket.NewTable(1, 100) // nothing refills within the test
			fillKeys(t, tab, n, keyLen)
			grown = liveHeap() - before
			if tab.Len() != n {
				t.Fatalf("key length %d: Len = %d, want %d", keyLen, tab.Len(), n)
			}
			runtime.KeepAlive(tab)
		}
		perKey[keyLen] = float64(grown) / float64(n)
		t.Logf("key length %5d: %d keys hold %d KiB, %.1f B per key", keyLen, n, grown>>10, perKey[keyLen])
		if limit := int64(64*n + 16<<10); grown > limit {
			t.Fatalf("key length %d: %d keys hold %d bytes, want ≤ %d (64 B per bucket + 16 KiB)", keyLen, n, grown, limit)
		}
	}
	// The arrays grow to twice the live count at the insert that crosses
	// three quarters, so where each shard's last growth fell (random, with
	// the seeds) moves the bytes per key by a few either way; a stored key
	// would add 10 KB.
	if d := perKey[10<<10] - perKey[10]; d > 8 || d < -8 {
		t.Fatalf("bytes per key depend on key length: %.1f for 10 B keys, %.1f for 10 KB keys", perKey[10], perKey[10<<10])
	}
}

// An empty Table is small: the stack makes one per "*" entry, and the
// largest gateway config has 50,000 of them.
func TestEmptyTableIsSmall(t *testing.T) {
	const n = 10_000
	tabs := make([]*bucket.Table, n)
	before := liveHeap()
	for i := range tabs {
		tabs[i] = bucket.NewTable(10, 10)
	}
	per := (liveHeap() - before) / n
	runtime.KeepAlive(tabs)
	t.Logf("empty Table: %d bytes", per)
	if per > 512 {
		t.Fatalf("an empty Table holds %d bytes, want ≤ 512", per)
	}
	// A Table with a few keys stays well under a kilobyte per key set.
	before = liveHeap()
	for i := range tabs {
		tabs[i] = bucket.NewTable(10, 10)
		for k := range 3 {
			tabs[i].TakeN(t0, strconv.Itoa(k), 1)
		}
	}
	per = (liveHeap() - before) / n
	runtime.KeepAlive(tabs)
	t.Logf("Table with 3 keys: %d bytes", per)
	if per > 1024 {
		t.Fatalf("a Table with 3 keys holds %d bytes, want ≤ 1 KiB", per)
	}
}

// Buckets that have refilled are reclaimed, and the memory comes back, with
// no new key arriving: only takes on 100 existing keys drive the sweep.
func TestTableReclaimsIdleWithoutInserts(t *testing.T) {
	n := 100_000
	if raceEnabled || testing.Short() {
		n = 20_000
	}
	before := liveHeap()
	tab := bucket.NewTable(10, 5) // a key that took one token is full 100 ms later
	fillKeys(t, tab, n, 16)
	full := liveHeap() - before
	keys := make([][]byte, 100)
	for i := range keys {
		keys[i] = make([]byte, 16)
		for j := range keys[i] {
			keys[i][j] = byte('a' + j%26)
		}
		binary.LittleEndian.PutUint64(keys[i], uint64(i))
	}
	// From one hour later on, every bucket has refilled. Take from 100 of
	// the keys, a second apart, until only they are left.
	const maxOps = 8_000_000
	step := 0
	takes := func(n int) {
		step++
		now := at(time.Hour + time.Duration(step)*time.Second)
		for i := range n {
			tab.AllowN(now, string(keys[i%len(keys)]), 1)
		}
	}
	ops := 0
	for ; ops < maxOps && tab.Len() > len(keys); ops += 10_000 {
		takes(10_000)
	}
	if l := tab.Len(); l > len(keys) {
		t.Fatalf("after %d takes on %d keys, %d of %d refilled buckets are still live", ops, len(keys), l, n)
	}
	// The arrays shrink after a sweep pass that found them mostly empty;
	// what is left is the Table, its 16 shard headers (2 KiB), the arrays
	// of the 100 live buckets (about 6 KiB) and the 100 keys (4 KiB).
	const overhead = 32 << 10
	reclaimed := ops
	left := liveHeap() - before
	for ; ops < maxOps && left > overhead; ops += 100_000 {
		takes(100_000)
		left = liveHeap() - before
	}
	runtime.KeepAlive(tab)
	t.Logf("%d keys: %d KiB live; all but the 100 in use reclaimed after %d takes, %d KiB left after %d", n, full>>10, reclaimed, left>>10, ops)
	if left > overhead {
		t.Fatalf("the Table still holds %d bytes after %d takes", left, ops)
	}
	// A new key after the reclaim starts full: the buckets dropped had refilled long before.
	if r := tab.TakeN(at(2*time.Hour), string(keys[0])+"x", 5); !r.OK {
		t.Fatalf("a new key after the reclaim: %+v, want the full burst", r)
	}
	binary.LittleEndian.PutUint64(keys[0], uint64(len(keys)+1)) // a filled key, not one of the 100
	if r := tab.TakeN(at(2*time.Hour), string(keys[0]), 5); !r.OK {
		t.Fatalf("a reclaimed key: %+v, want the full burst", r)
	}
}

// A query about a future instant does not move the high-water mark: a
// new key's bucket is still full for callers at the present.
func TestTableLookupDoesNotMoveHighWaterMark(t *testing.T) {
	tab := bucket.NewTable(1, 2, bucket.WithShards(1))
	for i := range 1000 {
		tab.TakeN(t0, "k"+strconv.Itoa(i), 1)
		tab.TokensAt(at(24*time.Hour), "k"+strconv.Itoa(i)) // what-if: tomorrow
		tab.TakeN(at(24*time.Hour), "k"+strconv.Itoa(i), 0)
	}
	if r := tab.TakeN(t0, "new", 2); !r.OK {
		t.Fatalf("a new key at t0 after queries about tomorrow: %+v, want the full burst", r)
	}
}

// Many goroutines on many keys, with buckets reclaimed and re-created,
// shards splitting and arrays resizing under them, and stale callers: no
// key's window admits more than burst + rate·Δt.
func TestTableConcurrentWindowBoundWithReclaim(t *testing.T) {
	const r, burst = 1000, 3 // full 3 ms after a take, dropped 50 ms later
	const workers, ops, nkeys = 8, 4000, 600
	tab := bucket.NewTable(r, burst, bucket.WithShards(4))
	var mu sync.Mutex
	grants := map[int][]grant{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			local := map[int][]grant{}
			ns := int64(0)
			buf := make([]byte, 0, 16)
			for i := range ops {
				// Each worker's clock walks on at its own pace, so the
				// workers see each other's instants as stale or ahead.
				ns += int64(rng.IntN(int(200 * time.Microsecond)))
				now := t0.Add(time.Duration(ns))
				k := rng.IntN(nkeys)
				if i%3 == 0 {
					k = rng.IntN(8) // a few hot keys
				}
				buf = strconv.AppendInt(append(buf[:0], 'k'), int64(k), 10)
				n := 1 + rng.IntN(2)
				var ok bool
				switch i % 4 {
				case 0:
					ok = tab.TakeBytes(now, buf, n).OK
				case 1:
					ok = tab.AllowN(now, string(buf), n)
				case 2:
					res := tab.TakeBytes(now, buf, n)
					ok = res.OK
					if ok && rng.IntN(4) == 0 { // a later stacked limit denied: give it back at once
						_ = tab.GiveBackBytes(buf, &res.Grant, n)
						ok = false
					}
				default:
					ok = tab.TakeN(now, string(buf), n).OK
				}
				if ok {
					local[k] = append(local[k], grant{now, n})
				}
				if w == 0 && i%500 == 0 {
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
	total := 0
	for _, g := range grants {
		total += len(g)
		checkWindows(t, g, r, burst, 0)
	}
	t.Logf("%d grants in %d takes on %d keys", total, workers*ops, len(grants))
	if total < 2000 || len(grants) < nkeys/2 {
		t.Fatalf("only %d grants on %d keys: too few to check", total, len(grants))
	}
}

// The hit path and the return of a reclaimed key allocate nothing.
func TestTableNoAllocsSteadyState(t *testing.T) {
	if raceEnabled || testing.CoverMode() != "" {
		t.Skip("allocation counts are not meaningful under -race or -cover")
	}
	const n = 5000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte("caller-" + strconv.Itoa(i))
	}
	// Refill regime: 1e6 tokens/s, so every bucket is full and past the
	// reclaim grace at each 100 ms step; sweeps drop buckets and the keys
	// come back to re-created ones.
	tab := bucket.NewTable(1e6, 10)
	now := t0
	pass := func() {
		now = now.Add(100 * time.Millisecond)
		for _, k := range keys {
			if !tab.TakeBytes(now, k, 1).OK {
				t.Fatal("denied")
			}
		}
	}
	for range 20 { // warm up: arrays reach their steady size
		pass()
	}
	if a := testing.AllocsPerRun(1, func() {
		for range 20 {
			pass()
		}
	}); a != 0 {
		t.Fatalf("refill regime: %v allocations in %d takes, want 0", a, 20*n)
	}
	hot := bucket.NewTable(1, 1<<30)
	hot.TakeN(now, "hit", 1)
	hotB := []byte("hit")
	if a := testing.AllocsPerRun(1000, func() {
		hot.Allow("hit")
		hot.TakeBytes(now, hotB, 1)
		hot.AllowN(now, "hit", 1)
		hot.ChargeBytes(now, hotB, 1)
		var g bucket.Grant
		if ok, _ := hot.TryTakeGrantBytes(now, hotB, 1, &g); ok {
			_ = hot.GiveBackBytes(hotB, &g, 1)
		}
		hot.TokensAt(now, "hit")
	}); a != 0 {
		t.Fatalf("hit: %v allocations, want 0", a)
	}
}

// Table.Allow and Take read the Table's clock.
func TestTableClock(t *testing.T) {
	clk := newFakeClock()
	tab := bucket.NewTable(1, 2, bucket.WithClock(clk))
	if !tab.Allow("a") || !tab.AllowBytes([]byte("a")) || tab.Allow("a") {
		t.Fatal("want two grants then a denial")
	}
	if r := tab.Take("a", 1); r.OK || r.RetryAfter != time.Second {
		t.Fatalf("Take on an empty bucket: %+v, want a 1s wait", r)
	}
	clk.Advance(time.Second)
	if r := tab.Take("a", 1); !r.OK || r.Remaining != 0 {
		t.Fatalf("Take a second later: %+v", r)
	}
	if got := tab.TokensAt(clk.Now(), "a"); got != 0 {
		t.Fatalf("TokensAt = %v, want 0", got)
	}
	// The system clock by default.
	sys := bucket.NewTable(rate.Every(time.Hour), 1)
	if !sys.Allow("x") || sys.Allow("x") {
		t.Fatal("system clock: want one grant then a denial")
	}
}
