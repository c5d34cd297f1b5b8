package redis

import (
	"reflect"
	"time"

	"github.com/sluicehq/sluice/internal/monoclock"
)

// NoCrossSlot makes b behave as on a server without the script flag
// allow-cross-slot-keys (before Redis 7): one call per slot.
func NoCrossSlot(b *Backend) { b.noCross.Store(true) }

// Settings reports what b's options resolved to: the timeout, the probe
// interval, the fallback share, the batch size, and whether decision time
// is the server's.
func Settings(b *Backend) (timeout, probe time.Duration, share float64, maxBatch int, serverTime bool) {
	return b.timeout, b.probe, b.share, b.maxBatch, b.clock == nil
}

// PaceStoreSettings reports s's timeout and whether its clock is the default, monoclock.Now.
func PaceStoreSettings(s *PaceStore) (timeout time.Duration, timeNow bool) {
	return s.timeout, reflect.ValueOf(s.now).Pointer() == reflect.ValueOf(monoclock.Now).Pointer()
}

// DenialCacheSize reports how many entries b's denial cache holds and the
// bytes it counts for them.
func DenialCacheSize(b *Backend) (n, bytes int) {
	if b.dc == nil {
		return 0, 0
	}
	for i := range b.dc.shards {
		s := &b.dc.shards[i]
		s.mu.Lock()
		n += len(s.m)
		bytes += s.bytes
		s.mu.Unlock()
	}
	return n, bytes
}

// ParseBucketKey is parseBucketKey, for the tests of package redis_test.
var ParseBucketKey = parseBucketKey

// Slot is slot, the Redis Cluster hash slot of a key.
var Slot = slot

// PaceStoreKey returns the Redis key of s's record of an upstream key.
func PaceStoreKey(s *PaceStore, key string) string { return s.redisKey(key) }
