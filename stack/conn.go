package stack

import (
	"sync"
	"time"
)

// DefaultLeaseTTL is how long a connection slot stays held when its
// reservation is never settled or cancelled: after it the slot is reclaimed,
// so a lost reservation cannot block an entry forever.
const DefaultLeaseTTL = 10 * time.Minute

// connRetryAfter is the RetryAfter given when a connections limit denies: a
// slot frees when some request ends, which no clock can predict.
const connRetryAfter = time.Second

// connPool counts the in-flight requests of one connections bucket. Each
// held slot is a lease with an expiry.
type connPool struct {
	mu     sync.Mutex
	leases map[uint64]int64 // lease id → expiry, ns since the bucket epoch
	used   bool             // in a connTable: acquired since the last sweep (under the table's lock)
}

// acquire takes a slot for lease id if fewer than limit are held at at.
// It returns whether it did and how many slots are left.
func (p *connPool) acquire(at time.Time, id uint64, limit int64, ttl time.Duration) (bool, int64) {
	now := at.UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	if int64(len(p.leases)) >= limit {
		for k, exp := range p.leases { // reclaim leases nobody settled
			if exp <= now {
				delete(p.leases, k)
			}
		}
	}
	if int64(len(p.leases)) >= limit {
		return false, 0
	}
	if p.leases == nil {
		p.leases = make(map[uint64]int64)
	}
	p.leases[id] = now + int64(ttl)
	return true, limit - int64(len(p.leases))
}

// release frees lease id; releasing twice, or after expiry, does nothing.
func (p *connPool) release(id uint64) {
	p.mu.Lock()
	delete(p.leases, id)
	p.mu.Unlock()
}

// connTable holds one connPool per value of a wildcard entry. A pool with no
// lease left carries no state and is dropped: after a refused acquire, and
// in an amortized sweep (when the table has doubled since the last one) that
// also reclaims expired leases, so values whose requests never settled do
// not accumulate. A pool emptied by a release waits for a sweep that finds
// it unused since the previous one, so the values in use reuse their pools
// without allocating.
type connTable struct {
	mu        sync.Mutex
	pools     map[string]*connPool
	lastSweep int // len(pools) after the last sweep
}

// connSweepMin is the table size below which no sweep runs.
const connSweepMin = 64

func (t *connTable) acquire(key []byte, at time.Time, id uint64, limit int64, ttl time.Duration) (bool, int64) {
	// One lock for the table: a pool is created, used and dropped under it,
	// so a release never drops a pool another request is joining.
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pools[string(key)]
	if p == nil {
		if t.pools == nil {
			t.pools = make(map[string]*connPool)
		}
		if len(t.pools) >= connSweepMin && len(t.pools) >= 2*t.lastSweep {
			t.sweep(at)
		}
		p = &connPool{}
		t.pools[string(key)] = p
	}
	p.used = true
	ok, left := p.acquire(at, id, limit, ttl)
	if !ok && len(p.leases) == 0 {
		delete(t.pools, string(key)) // refused (limit 0): nothing to keep
	}
	return ok, left
}

// sweep drops expired leases and then the empty pools not acquired since
// the last sweep (a value in use keeps its pool). t.mu is held.
func (t *connTable) sweep(at time.Time) {
	now := at.UnixNano()
	for k, p := range t.pools {
		p.mu.Lock()
		for id, exp := range p.leases {
			if exp <= now {
				delete(p.leases, id)
			}
		}
		empty := len(p.leases) == 0
		p.mu.Unlock()
		if empty && !p.used {
			delete(t.pools, k)
		}
		p.used = false
	}
	t.lastSweep = len(t.pools)
}

func (t *connTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pools)
}

func (t *connTable) release(key []byte, id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pools[string(key)]
	if p == nil {
		return
	}
	// An emptied pool stays until the next sweep drops it: the value's next
	// request then reuses it (and its lease map) instead of allocating.
	p.release(id)
}
