package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/monoclock"
	"github.com/sluicehq/sluice/pace"
)

// PaceStoreTTL is how long a PaceStore record lives after its last write
// (longer while a pause it holds is in force): records of upstreams
// nobody calls any more disappear, and a fleet that calls an upstream
// writes its record at least once per refresh interval.
const PaceStoreTTL = 10 * time.Minute

// mergeSource merges a quota and a pause into a record as pace.Learned's
// Merge does, sets its expiry and returns it.
//
// KEYS[1] is the record, a hash: l (limit), w (window, µs), a (when the
// quota was read, Unix µs), p (paused until, Unix µs). ARGV: limit,
// window, at ("" for no quota), paused until ("" for no pause), TTL (ms).
// Every number stays below 2^53, exact in Lua.
const mergeSource = `
local k = KEYS[1]
-- a stored number, or -1 for a field missing or not one we wrote
local function num(v)
  local n = tonumber(v)
  if n == nil or n ~= n or n < 0 or n > 9007199254740992 then return -1 end
  return n
end
if ARGV[3] ~= '' then
  local at = num(redis.call('HGET', k, 'a'))
  if tonumber(ARGV[3]) >= at then
    redis.call('HSET', k, 'l', ARGV[1], 'w', ARGV[2], 'a', ARGV[3])
  end
end
if ARGV[4] ~= '' then
  local p = num(redis.call('HGET', k, 'p'))
  if tonumber(ARGV[4]) > p then
    redis.call('HSET', k, 'p', ARGV[4])
  end
end
if redis.call('EXISTS', k) == 1 then
  local ttl = tonumber(ARGV[5])
  local cur = redis.call('PTTL', k)
  if cur > ttl then ttl = cur end
  redis.call('PEXPIRE', k, ttl)
end
return redis.call('HMGET', k, 'l', 'w', 'a', 'p')
`

var mergeScript = goredis.NewScript(mergeSource)

// PaceStore is a pace.Store in Redis: the Transports of a fleet that share
// one (pace.WithStore) pace by the quota any of them read from an
// upstream's headers, and pause when any of them is throttled.
//
// Each upstream is one hash, "<prefix>:pace:<digest>" (the digest is 128
// bits of SHA-256 of the upstream's key, so a record's size does not
// depend on the key), expiring PaceStoreTTL after its last write or when
// the pause it holds ends, whichever is later. Load is one HMGET, Merge
// one script call; each is bounded by the timeout. Values that cannot be
// read back (a key of another type or with unparseable fields, as from a
// foreign writer) are left out of the record, and the Transport ignores
// those that cannot be trusted.
//
// A PaceStore is safe for concurrent use. It starts no goroutine.
type PaceStore struct {
	client  goredis.UniversalClient
	prefix  string
	timeout time.Duration
	now     func() time.Time
}

var _ pace.Store = (*PaceStore)(nil)

// NewPaceStore returns a PaceStore over client. Of the Options, three
// apply, as they do to New: WithKeyPrefix (default "sluice"), WithTimeout
// (default 50 ms per call; the client needs ContextTimeoutEnabled) and
// WithClock (the clock a pause's expiry is measured on; default sluice's
// clock, wall time advanced by the monotonic clock only); the others are ignored, except that an invalid value in any
// of them is an error here as in New.
func NewPaceStore(client goredis.UniversalClient, opts ...Option) (*PaceStore, error) {
	if client == nil {
		return nil, errors.New("sluice/redis: nil client")
	}
	o := newOptions(opts)
	if o.err != nil {
		return nil, o.err
	}
	s := &PaceStore{client: client, prefix: o.prefix + ":pace:", timeout: o.timeout, now: o.clock}
	if s.now == nil {
		s.now = monoclock.Now
	}
	return s, nil
}

// redisKey returns the Redis key of the record of the upstream key: the
// prefix, then 32 hex digits of the key's SHA-256.
func (s *PaceStore) redisKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return s.prefix + hex.EncodeToString(sum[:16])
}

// Load implements pace.Store.
func (s *PaceStore) Load(ctx context.Context, key string) (pace.Learned, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	vals, err := s.client.HMGet(ctx, s.redisKey(key), "l", "w", "a", "p").Result()
	if err != nil {
		return pace.Learned{}, fmt.Errorf("sluice/redis: pace store load: %w", err)
	}
	return parseLearned(vals), nil
}

// Merge implements pace.Store.
func (s *PaceStore) Merge(ctx context.Context, key string, l pace.Learned) (pace.Learned, error) {
	limit, window, at := "", "", ""
	if l.Limit > 0 && l.Window >= time.Microsecond && !l.At.IsZero() {
		limit = strconv.FormatInt(l.Limit, 10)
		window = strconv.FormatInt(l.Window.Microseconds(), 10)
		at = strconv.FormatInt(l.At.UnixMicro(), 10)
	}
	paused := ""
	ttl := PaceStoreTTL
	if !l.PausedUntil.IsZero() {
		paused = strconv.FormatInt(l.PausedUntil.UnixMicro(), 10)
		if d := l.PausedUntil.Sub(s.now()) + time.Second; d > ttl {
			ttl = min(d, PaceStoreTTL+24*time.Hour)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := mergeScript.Run(ctx, s.client, []string{s.redisKey(key)},
		limit, window, at, paused, ttl.Milliseconds()).Slice()
	if err != nil {
		return pace.Learned{}, fmt.Errorf("sluice/redis: pace store merge: %w", err)
	}
	return parseLearned(res), nil
}

// maxMicros bounds the numbers read back, so that converting them to a
// time.Duration or time.Time cannot overflow (2^53 µs is 285 years).
const maxMicros = 1 << 53

// parseLearned reads a record's fields (l, w, a, p, as HMGET returns them:
// strings or nil). A quota with a field missing, unparseable, not
// positive or out of bounds is left out, and so is such a pause.
func parseLearned(vals []any) pace.Learned {
	var l pace.Learned
	if len(vals) != 4 {
		return l
	}
	num := func(v any) (int64, bool) {
		str, ok := v.(string)
		if !ok || str == "" || len(str) > 20 {
			return 0, false
		}
		n, err := strconv.ParseInt(str, 10, 64)
		if err != nil || n <= 0 || n > maxMicros {
			return 0, false
		}
		return n, true
	}
	lim, okL := num(vals[0])
	win, okW := num(vals[1])
	at, okA := num(vals[2])
	if okL && okW && okA {
		l.Limit, l.Window, l.At = lim, time.Duration(win)*time.Microsecond, time.UnixMicro(at)
	}
	if p, ok := num(vals[3]); ok {
		l.PausedUntil = time.UnixMicro(p)
	}
	return l
}
