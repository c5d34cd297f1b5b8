package pace

import (
	"container/list"
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// Learned is what the Transports of a fleet know about one upstream's
// limits, as a Store holds it: the request quota one of them last read
// from the upstream's headers, and the instant until which a throttled
// response paused every caller. The zero Learned knows nothing.
//
// Times are wall-clock instants of the writers' clocks (WithClock), so
// the clocks of a fleet must agree to well under its pauses, as NTP keeps
// them.
type Learned struct {
	// Limit is the request quota: Limit requests per Window, as the
	// upstream stated it (each reader applies its own WithLimit ceiling).
	// Zero when unknown.
	Limit  int64
	Window time.Duration
	// At is when Limit was read from the upstream; zero when Limit is.
	At time.Time
	// PausedUntil is the instant before which no request should be sent
	// to the upstream; zero (or past) when it is not paused.
	PausedUntil time.Time
}

// Merge returns what a Store holds after n is merged into l: n's quota
// replaces l's when n states one (Limit and Window positive, At set) read
// no earlier than l's, and the pause is the later of the two. Merge is
// commutative for quotas read at different instants, so the order in
// which a fleet's writes arrive does not matter. Store implementations
// should merge as Merge does.
func (l Learned) Merge(n Learned) Learned {
	if n.Limit > 0 && n.Window > 0 && !n.At.IsZero() && !n.At.Before(l.At) {
		l.Limit, l.Window, l.At = n.Limit, n.Window, n.At
	}
	if n.PausedUntil.After(l.PausedUntil) {
		l.PausedUntil = n.PausedUntil
	}
	return l
}

// Store holds what a fleet's Transports have learned about each upstream
// (WithStore), so that every process paces by the quota that any of them
// read from the upstream's headers, and pauses when any of them is
// throttled. Keys are the value of DefaultKeys' "upstream" dimension
// (scheme, host, '#' and the digest of the key) or "name:" and the name
// given to Wait and Throttled; they are the same in every process.
//
// MemoryStore keeps the records in one process (Transports of one
// process, tests); sluiceredis.PaceStore (package sluice/redis) keeps them in Redis for a
// fleet. An implementation must be safe for concurrent use and should
// bound the time of each call: a Transport calls it on a request's path,
// with the request's context. It may forget records (evict, expire); a
// forgotten record only means that processes learn on their own again.
type Store interface {
	// Load returns the record of the upstream key, or the zero Learned
	// when there is none.
	Load(ctx context.Context, key string) (Learned, error)
	// Merge merges l into the record of key, as Learned.Merge does, and
	// returns the record after the merge.
	Merge(ctx context.Context, key string, l Learned) (Learned, error)
}

// MemoryStore is a Store in memory, for the Transports of one process (and
// for tests). It keeps at most a fixed number of upstreams, forgetting the
// least recently used one when full; it stores a 128-bit digest of each
// key, not the key, so its memory per upstream is fixed. It is safe for
// concurrent use; its calls never fail.
type MemoryStore struct {
	mu     sync.Mutex
	max    int
	s1, s2 maphash.Seed
	m      map[storeKey]*list.Element
	lru    list.List // of *storeEntry, most recently used first
}

type storeKey [2]uint64

type storeEntry struct {
	key storeKey
	l   Learned
}

// NewMemoryStore returns a MemoryStore that keeps at most maxUpstreams
// records (1024, as WithMaxUpstreams, when maxUpstreams < 1).
func NewMemoryStore(maxUpstreams int) *MemoryStore {
	if maxUpstreams < 1 {
		maxUpstreams = defaultMaxUpstreams
	}
	return &MemoryStore{max: maxUpstreams, s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), m: make(map[storeKey]*list.Element)}
}

func (s *MemoryStore) digest(key string) storeKey {
	return storeKey{maphash.String(s.s1, key), maphash.String(s.s2, key)}
}

// Load implements Store.
func (s *MemoryStore) Load(_ context.Context, key string) (Learned, error) {
	k := s.digest(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[k]
	if e == nil {
		return Learned{}, nil
	}
	s.lru.MoveToFront(e)
	return e.Value.(*storeEntry).l, nil
}

// Merge implements Store.
func (s *MemoryStore) Merge(_ context.Context, key string, l Learned) (Learned, error) {
	k := s.digest(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[k]; e != nil {
		s.lru.MoveToFront(e)
		se := e.Value.(*storeEntry)
		se.l = se.l.Merge(l)
		return se.l, nil
	}
	merged := Learned{}.Merge(l)
	if merged == (Learned{}) {
		return merged, nil // nothing to keep
	}
	if len(s.m) >= s.max {
		if old := s.lru.Back(); old != nil {
			delete(s.m, old.Value.(*storeEntry).key)
			s.lru.Remove(old)
		}
	}
	se := &storeEntry{key: k, l: merged}
	s.m[k] = s.lru.PushFront(se)
	return se.l, nil
}

// len reports how many upstreams s holds records for.
func (s *MemoryStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
