package stack

import (
	"strconv"
)

// FallbackError is passed to a Stack's error handler (WithErrorHandler) by a
// backend that stops deciding in the shared store and decides locally
// instead, by one that comes back, and periodically while it stays local, so
// that an outage is never invisible. It is an event to count or log, not a
// failed decision: the decisions themselves followed the backend's policy.
type FallbackError struct {
	// Active reports whether decisions are local (in the fallback) from this
	// event on; false means the shared store decides again.
	Active bool
	// Failures counts the store's failures since the fallback began.
	Failures int64
	// Local counts the decisions made locally since the fallback began.
	Local int64
	// Err is the latest failure, nil on the way back; a backend whose
	// fallback is per part of the store (per Redis Cluster master) may
	// instead name the part in every event, with an error whose own
	// failure is nil on the way back.
	Err error
}

func (e *FallbackError) Error() string {
	s := "stack: backend back, deciding in the shared store"
	if e.Active {
		s = "stack: backend unavailable, deciding locally"
	}
	s += " (" + strconv.FormatInt(e.Failures, 10) + " failures, " + strconv.FormatInt(e.Local, 10) + " local decisions)"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the latest failure.
func (e *FallbackError) Unwrap() error { return e.Err }
