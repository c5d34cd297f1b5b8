package envoyrls

import "time"

// TickWith makes w's Start tick on ticks instead of a real ticker, and
// close stopped when Start's goroutine stops its ticker.
func TickWith(w *Watcher, ticks <-chan time.Time, stopped chan<- struct{}) {
	w.ticker = func(time.Duration) (<-chan time.Time, func()) {
		return ticks, func() { close(stopped) }
	}
}

// The keys of the response's dynamic metadata, for the tests.
const (
	MetaDeniedBy     = metaDeniedBy
	MetaDescriptor   = metaDescriptor
	MetaRetryAfterMs = metaRetryAfterMs
	MetaPermanent    = metaPermanent
	MetaShadowDenied = metaShadowDenied
	MetaShadow       = metaShadow
	MetaError        = metaError
	MetaMetadata     = metaMetadata
)

// AfterCheck makes w's Start call f after each Check.
func AfterCheck(w *Watcher, f func()) { w.afterCheck = f }

// BetweenReads makes w's Check call f between a refused read of the files
// and the read that confirms it.
func BetweenReads(w *Watcher, f func()) { w.betweenReads = f }
