package redis

import (
	"reflect"
	"time"
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

// PaceStoreSettings reports s's timeout and whether its clock is time.Now.
func PaceStoreSettings(s *PaceStore) (timeout time.Duration, timeNow bool) {
	return s.timeout, reflect.ValueOf(s.now).Pointer() == reflect.ValueOf(time.Now).Pointer()
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
