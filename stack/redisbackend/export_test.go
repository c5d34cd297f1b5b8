package redisbackend

// NoCrossSlot makes b behave as on a server without the script flag
// allow-cross-slot-keys (before Redis 7): one call per slot.
func NoCrossSlot(b *Backend) { b.noCross.Store(true) }
