package redis

import (
	"context"
	"strings"
)

// Logging is the logger interface of go-redis (redis.SetLogger).
type Logging interface {
	Printf(ctx context.Context, format string, v ...any)
}

// QuietLogger returns a logger for redis.SetLogger that drops go-redis's
// messages about failing to connect, and passes every other message to
// next (nil discards them all). While Redis is down, go-redis logs each
// failed dial, which with many callers means many lines a second; with a
// Backend those failures are already counted and reported to the Stack's
// error handler (a *stack.FallbackError on entering the local fallback,
// then at most once a second), so the log lines add nothing but noise.
// go-redis has no per-client logger: redis.SetLogger applies to every
// client of the program.
//
//	redis.SetLogger(sluiceredis.QuietLogger(nil))
func QuietLogger(next Logging) Logging { return quietLogger{next} }

type quietLogger struct{ next Logging }

// dialMessages are the go-redis format strings QuietLogger drops.
var dialMessages = []string{"failed to dial", "failed to get a usable connection"}

func (q quietLogger) Printf(ctx context.Context, format string, v ...any) {
	for _, m := range dialMessages {
		if strings.Contains(format, m) {
			return
		}
	}
	if q.next != nil {
		q.next.Printf(ctx, format, v...)
	}
}
