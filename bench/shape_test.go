package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkAPIShape measures what the shape of sluice.Limiter costs a
// one-pair decision, against the smaller shapes issue 25 asked about: the
// same trivial decision (read the caller, admit) behind an interface, with
// the Keys and the result of each shape passed by value. It answers whether
// changing the v0.1.0 API would buy what BenchmarkOneLimit's api-only side
// costs:
//
//	go test ./bench -run '^$' -bench APIShape -benchtime 2000000x
//
// Sides:
//
//	sluice      sluice.Keys (224 bytes: six pairs inline) in, sluice.Decision
//	            (192 bytes) out: the API as it is
//	keys3       a Keys of three inline pairs (128 bytes), the same Decision
//	small       the same Keys, a Decision of the allow path's fields only
//	            (Allowed, RetryAfter, LimitID, Limit, Remaining, Window, and
//	            a pointer to the rest: 64 bytes)
//	keys3-small both smaller
//	string      go-limiter's shape: the caller as a string in, a bool out
//
// Any Keys that holds a pair inline is over the 32 bytes the compiler keeps
// in registers, so every shape but string is built and copied through
// memory; a Keys passed by pointer through an interface would escape and
// allocate. The ratios to sluice say what a smaller API could save.
func BenchmarkAPIShape(b *testing.B) {
	callers := make([]string, 10_000)
	for i := range callers {
		callers[i] = "caller-" + strconv.Itoa(i*7+13)
	}
	ctx := context.Background()
	var (
		full     sluice.Limiter = sluice.LimiterFunc(fullShape)
		k3       keys3Limiter   = keys3Func(keys3Shape)
		small    smallLimiter   = smallFunc(smallShape)
		k3small  k3SmallLimiter = k3SmallFunc(k3SmallShape)
		str      stringLimiter  = stringFunc(stringShape)
		names                   = []string{"sluice", "keys3", "small", "keys3-small", "string"}
		caller                  = func(k int) string { return callers[(k*7919)%len(callers)] }
		admitted                = func(ok bool) {
			if !ok {
				b.Fatal("denied")
			}
		}
	)
	b.ReportAllocs()
	interleave(b, 15, "sluice", func(side, k int) {
		c := caller(k)
		switch side {
		case 0:
			d, err := full.Allow(ctx, sluice.NewKeys("caller", c))
			admitted(err == nil && d.Allowed)
		case 1:
			d, err := k3.Allow(ctx, newKeys3("caller", c))
			admitted(err == nil && d.Allowed)
		case 2:
			d, err := small.Allow(ctx, sluice.NewKeys("caller", c))
			admitted(err == nil && d.Allowed && d.denial == nil)
		case 3:
			d, err := k3small.Allow(ctx, newKeys3("caller", c))
			admitted(err == nil && d.Allowed && d.denial == nil)
		case 4:
			ok, err := str.Allow(ctx, c)
			admitted(err == nil && ok)
		}
	}, names)
}

// keys3 is sluice.Keys with three inline pairs instead of six.
type keys3 struct {
	n      int
	inline [3]sluice.KV
	more   []sluice.KV
}

func newKeys3(nameValues ...string) (k keys3) {
	if len(nameValues) == 2 {
		k.n, k.inline[0] = 1, sluice.KV{Name: nameValues[0], Value: nameValues[1]}
	}
	return k
}

func (k *keys3) get(name string) (string, bool) {
	for i := 0; i < k.n; i++ {
		kv := &k.inline[min(i, len(k.inline)-1)]
		if i >= len(k.inline) {
			kv = &k.more[i-len(k.inline)]
		}
		if kv.Name == name {
			return kv.Value, true
		}
	}
	return "", false
}

// smallDecision is a Decision of the allow path's fields, the denial's
// details behind a pointer.
type smallDecision struct {
	Allowed          bool
	RetryAfter       time.Duration
	LimitID          string
	Limit, Remaining int64
	Window           time.Duration
	denial           *sluice.Decision
}

type (
	keys3Limiter interface {
		Allow(context.Context, keys3) (sluice.Decision, error)
	}
	smallLimiter interface {
		Allow(context.Context, sluice.Keys) (smallDecision, error)
	}
	k3SmallLimiter interface {
		Allow(context.Context, keys3) (smallDecision, error)
	}
	stringLimiter interface {
		Allow(context.Context, string) (bool, error)
	}

	keys3Func   func(context.Context, keys3) (sluice.Decision, error)
	smallFunc   func(context.Context, sluice.Keys) (smallDecision, error)
	k3SmallFunc func(context.Context, keys3) (smallDecision, error)
	stringFunc  func(context.Context, string) (bool, error)
)

func (f keys3Func) Allow(ctx context.Context, k keys3) (sluice.Decision, error) { return f(ctx, k) }
func (f smallFunc) Allow(ctx context.Context, k sluice.Keys) (smallDecision, error) {
	return f(ctx, k)
}
func (f k3SmallFunc) Allow(ctx context.Context, k keys3) (smallDecision, error) { return f(ctx, k) }
func (f stringFunc) Allow(ctx context.Context, c string) (bool, error)          { return f(ctx, c) }

// The decisions: the caller read back and admitted, the limit named, as
// BenchmarkOneLimit's api-only side does.

func fullShape(_ context.Context, k sluice.Keys) (sluice.Decision, error) {
	c, _ := k.Get("caller")
	return sluice.Decision{Allowed: c != "", LimitID: "per-caller"}, nil
}

func keys3Shape(_ context.Context, k keys3) (sluice.Decision, error) {
	c, _ := k.get("caller")
	return sluice.Decision{Allowed: c != "", LimitID: "per-caller"}, nil
}

func smallShape(_ context.Context, k sluice.Keys) (smallDecision, error) {
	c, _ := k.Get("caller")
	return smallDecision{Allowed: c != "", LimitID: "per-caller"}, nil
}

func k3SmallShape(_ context.Context, k keys3) (smallDecision, error) {
	c, _ := k.get("caller")
	return smallDecision{Allowed: c != "", LimitID: "per-caller"}, nil
}

func stringShape(_ context.Context, c string) (bool, error) { return c != "", nil }
