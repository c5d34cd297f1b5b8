package redis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stack"
)

//go:embed gcra.lua
var gcraSource string

var gcraScript = goredis.NewScript(gcraSource)

// gcraCross is the script with the flag that lets it touch keys of several
// slots of one cluster node (Redis 7 and later), for mode "x".
var gcraCross = goredis.NewScript(gcraCrossSource)

const gcraCrossHeader = "#!lua flags=allow-cross-slot-keys\n"

var gcraCrossSource = gcraCrossHeader + gcraSource

// ErrUnavailable matches (with errors.Is) the error Take and Adjust return
// when Redis cannot decide now: no reply (connection refused or reset,
// timeout), or a reply saying it cannot serve the call (OOM, BUSY,
// LOADING, READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, MISCONF,
// NOREPLICAS, NOSCRIPT after EVAL), or Redis failed so recently that it is
// not asked again yet (see WithProbeInterval). The error wraps the
// client's error too. The Stack then follows its policy: fail open, fail
// closed, or the local fallback (WithLocalFallback) decides instead.
var ErrUnavailable = errors.New("sluice/redis: redis unavailable")

const (
	// maxTau bounds a bucket's capacity in ticks so that every number the
	// script stores stays exact in a float64 (with room for debt).
	maxTau = int64(1) << 50

	defaultPrefix  = "sluice"
	defaultBatch   = 64
	defaultTimeout = 50 * time.Millisecond
	defaultProbe   = 200 * time.Millisecond
)

// Backend is a stack.Backend that keeps every bucket in Redis, so that all
// the processes using the same Redis (and key prefix) share one limit. Each
// decision is at most one round trip: a Lua script evaluates and commits all
// the stacked buckets atomically (EVALSHA, with EVAL when the server does not
// have the script cached), and concurrent decisions share a call
// (WithMaxBatch). Connections slots are shared too (stack.ConnBackend).
//
// Semantics are those of stack.MemoryBackend (package bucket's GCRA): a new
// bucket is full, a denied decision takes nothing, rate 0 blocks, a cost
// above the burst is a permanent denial, RetryAfter is never early.
//
// Resolution: instants are whole microseconds (the Redis TIME resolution);
// RetryAfter is rounded up to the microsecond. A bucket whose capacity,
// counted in its exact ticks, would exceed 2^50 (only for huge bursts with
// rates that do not divide the period) is evaluated on a coarser time unit
// (10 µs, 100 µs, …) chosen per bucket; see Take's errors for the rest.
//
// By default all keys of one Backend share one Redis Cluster hash tag, so a
// decision's keys are in one slot and one stack's buckets live on one
// cluster node. WithSpread gives each bucket its own tag, spreading the
// buckets over the cluster (see the package documentation, "Redis
// Cluster").
//
// A Backend is safe for concurrent use. It starts no goroutine.
type Backend struct {
	client    goredis.UniversalClient
	prefix    string
	tag       string
	keyPrefix string // "<prefix>:{<tag>}:"; "<prefix>:" in the spread layout
	layout    int
	pin       func(Bucket) string
	cluster   *goredis.ClusterClient // set with the spread layout on a cluster
	isCluster bool                   // the client is a *goredis.ClusterClient
	noCross   atomic.Bool            // the cluster has no allow-cross-slot-keys: a call per slot
	anyDown   atomic.Bool            // nodesDown is not empty
	anyLocal  atomic.Bool            // fb.nodes is not empty
	nodesMu   sync.Mutex
	nodesDown map[string]nodeDown          // failed cluster nodes, by address (spread layout, no fallback)
	nodeBatch map[*goredis.Client]*batcher // per cluster node (spread layout), under nodesMu
	clock     func() time.Time
	timeout   time.Duration
	probe     time.Duration
	share     float64 // local fallback share; 0: none

	start     time.Time // origin of mono: the injected clock's reading at New, else time.Now()
	realStart time.Time // origin of realMono: time.Now() at New

	// state is stateUp (every call asks Redis), stateDown (Redis failed:
	// calls are local or fail until a probe) or stateRejoin (Redis is back,
	// decisions are also bounded by the local buckets for a while). The
	// rest of the failure state is in fb, under its mutex.
	state atomic.Int32
	fb    fallbackState

	maxBatch int // most decisions per script call; 1: no batching
	batch    batcher
	shared   atomic.Pointer[sharedCtx]
	dc       *denyCache // the near-cache of denials (denycache.go); nil: off

	sharedMu     sync.Mutex // makes shared contexts, one at a time
	sharedGen    int
	sharedCancel [sharedGens]context.CancelFunc
}

var _ stack.ConnBackend = (*Backend)(nil)

// SharesConnections implements stack.ConnBackend: connections slots are
// leases in a Redis sorted set per bucket, shared by the fleet, released by
// Reconcile and Cancel, and expired after the Stack's lease TTL
// (stack.WithLeaseTTL) when a process dies holding them.
func (b *Backend) SharesConnections() bool { return true }

// Option configures New and NewPaceStore. Options are made by the With…
// functions of this package. A zero, negative, NaN or nil value means the
// option is not given (its default, named in its doc); a value wrong in
// another way makes New (or NewPaceStore) return an error naming the
// option and the value.
type Option interface{ apply(*options) }

// options are what the Options set. err is the first invalid option's
// error, which the constructor returns.
type options struct {
	prefix    string
	tag       string
	layout    int
	pin       func(Bucket) string
	clock     func() time.Time
	timeout   time.Duration
	probe     time.Duration
	share     float64
	maxBatch  int
	denyBytes int // near-cache of denials: 0 default, -1 off
	err       error
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// fail records err as the options' error unless an earlier option failed.
func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

func newOptions(opts []Option) options {
	o := options{prefix: defaultPrefix, timeout: defaultTimeout, probe: defaultProbe, maxBatch: defaultBatch}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	return o
}

// WithKeyPrefix sets the prefix of every key. Keys are
// "<prefix>:{<tag>}:<bucket key>" with the bucket key of stack.Op.Key.
// An empty p means the default, "sluice"; a prefix that contains '{' or
// '}' is an error.
func WithKeyPrefix(p string) Option {
	return optionFunc(func(o *options) {
		switch {
		case p == "":
		case strings.ContainsAny(p, "{}"):
			o.fail(fmt.Errorf("sluice/redis: WithKeyPrefix(%q): the prefix contains '{' or '}'", p))
		default:
			o.prefix = p
		}
	})
}

// WithHashTag sets the Redis Cluster hash tag shared by all keys. An empty
// tag means the default, the key prefix (keys look like
// "sluice:{sluice}:…"); a tag that contains '{' or '}' is an error.
func WithHashTag(tag string) Option {
	return optionFunc(func(o *options) {
		switch {
		case tag == "":
		case strings.ContainsAny(tag, "{}"):
			o.fail(fmt.Errorf("sluice/redis: WithHashTag(%q): the tag contains '{' or '}'", tag))
		default:
			o.tag = tag
		}
	})
}

// WithSpread gives every bucket its own hash tag, a digest of its limit
// and of the values that select it ("sluice:{1f0c9a2e}:<bucket key>"), so
// that on Redis Cluster the buckets of a stack spread over every slot and
// every master instead of sharing one slot (the default, WithHashTag). The
// rates of one limit for one set of values keep one tag. A decision whose
// buckets sit on several nodes makes one script call per node, sent
// concurrently, and keeps the stack's semantics (see the package
// documentation, "Redis Cluster"); concurrent decisions on one node are
// batched per node. It cannot be combined with WithHashTag
// and needs a *goredis.Client or a *goredis.ClusterClient (not a Ring).
//
// Switching a fleet to it renames every key: buckets start full once, and
// while old and new processes run side by side each side has its own
// buckets. On a single server the spread changes nothing but key names,
// which is why it is not the default.
func WithSpread() Option {
	return optionFunc(func(o *options) {
		o.layout = layoutSpread
	})
}

// WithPin is WithSpread where pin chooses the tag of some buckets: the
// buckets for which pin returns the same non-empty string share one slot,
// so that a common decision stays on one node (one round trip). Buckets
// for which it returns "" are spread. For instance, to keep every bucket
// of one caller together, pin by the caller's dimension of the limits that
// have it:
//
//	sluiceredis.WithPin(func(k sluiceredis.Bucket) string {
//		switch k.LimitID {
//		case "per-caller", "per-caller-tool":
//			return k.Value(0) // dimension 0 is the caller in both
//		}
//		return ""
//	})
//
// pin must be fast, safe for concurrent use and always give the same
// answer for the same bucket. Every process of a fleet must use the same
// pin function, or they will not share buckets. A nil pin means the option
// is not given: the default layout, one hash tag (WithHashTag).
func WithPin(pin func(Bucket) string) Option {
	return optionFunc(func(o *options) {
		if pin == nil {
			return
		}
		o.layout = layoutSpread
		o.pin = pin
	})
}

// WithClock makes the backend read decision time from c.Now instead of the
// Redis server's TIME (c.Sleep is not used). By default time comes from the
// server, so that pods with skewed clocks still share one timeline. Use it
// in tests and simulations. Key expiry still follows the server's clock, so
// the injected clock must not run slower than real time. A nil c means the
// default: the server's TIME for a Backend, sluice's default clock (wall
// time advanced by the monotonic clock) for a PaceStore.
//
// A Backend's own timers follow c too: the probe interval
// (WithProbeInterval), the rejoin period after an outage and the local
// fallback's once-a-second reports are measured on it, so a test or a
// simulation steps them as it steps decisions. A backend on a clock that
// never advances no longer probes Redis after a failure. Only the timeout
// (WithTimeout), a network deadline, stays on real time.
func WithClock(c sluice.Clock) Option {
	return optionFunc(func(o *options) {
		if c != nil {
			o.clock = c.Now
		}
	})
}

// WithTimeout bounds each call to Redis; d ≤ 0 means the default, 50 ms.
// The bound applies to reading the reply only if the client was created
// with ContextTimeoutEnabled: true (go-redis otherwise uses its
// ReadTimeout).
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	})
}

// WithProbeInterval sets how long after Redis fails the backend stops
// asking it: calls in that interval fail at once with ErrUnavailable, or
// use the local fallback. After it, one call probes Redis (a write, which
// also pays what the fallback decided); when it succeeds, every call goes
// back to Redis. d ≤ 0 means the default, 200 ms. The interval is measured
// on the injected clock when there is one (WithClock): a nanosecond probes
// on nearly every call, or with WithClock on every call made after the
// clock has moved since the last failure.
func WithProbeInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.probe = d
		}
	})
}

// WithLocalFallback makes the backend decide with in-process buckets while
// Redis cannot decide (see ErrUnavailable), instead of returning an error:
// each bucket gets share of its rate and of its burst (burst rounded up),
// share in (0, 1]. With N processes, share 1/N keeps the fleet within the
// shared limit. By default there is no fallback: a share ≤ 0 or NaN means
// the default, and a share above 1 is an error.
//
// It is the backend's own degradation, not a failure policy: while the
// fallback decides, Take returns decisions and no error, so the Stack's
// policy (fail open by default, stack.WithFailClosed) never sees the
// outage; that policy applies only to the errors the backend still returns
// (without a fallback, every ErrUnavailable; with one, a failure the
// fallback cannot answer, such as a context that ended).
//
// Switching never creates tokens: a local bucket starts empty (it gets its
// share of the rate from the start of the outage, no burst), what is
// decided locally is charged to Redis (down to zero, never into debt) by
// the probe that ends the outage, and for a rejoin period afterwards
// (1 s, or 4 × (probe interval + timeout) if longer) a decision must pass
// both Redis and the local bucket, so that processes still deciding
// locally, whose charges Redis has not yet seen, cannot be outrun.
//
// The Stack's error handler (stack.WithErrorHandler) hears a
// *stack.FallbackError when the backend enters the fallback, at most once a
// second while in it (with the count of failures and of local decisions),
// and when it leaves it.
//
// With WithSpread or WithPin on a Redis Cluster the fallback is per
// master: only the buckets of a master that cannot decide are decided
// locally, and each event's Err is a *NodeError naming it (see the package
// documentation, "Redis Cluster").
func WithLocalFallback(share float64) Option {
	return optionFunc(func(o *options) {
		switch {
		case !(share > 0): // zero, negative or NaN: not given
		case share > 1:
			o.fail(fmt.Errorf("sluice/redis: WithLocalFallback(%v): the share is not in (0, 1]", share))
		default:
			o.share = share
		}
	})
}

// WithMaxBatch sets how many concurrent decisions of this process may go
// to Redis in one script call (1 sends each alone); n ≤ 0 means the
// default, 64. A decision
// is sent at once while fewer than two calls are in flight; the ones that
// arrive meanwhile wait and go together in the next call, each still
// evaluated atomically and in order. Under concurrency this saves round
// trips and server time per decision; a lone caller never waits.
func WithMaxBatch(n int) Option {
	return optionFunc(func(o *options) {
		if n > 0 {
			o.maxBatch = n
		}
	})
}

// New returns a Backend on client (a *goredis.Client, *goredis.ClusterClient or
// *goredis.Ring). It reports an error for an invalid option.
func New(client goredis.UniversalClient, opts ...Option) (*Backend, error) {
	if client == nil {
		return nil, errors.New("sluice/redis: nil client")
	}
	o := newOptions(opts)
	if o.err != nil {
		return nil, o.err
	}
	b := &Backend{client: client, prefix: o.prefix, tag: o.tag, layout: o.layout, pin: o.pin, clock: o.clock,
		timeout: o.timeout, probe: o.probe, share: o.share, maxBatch: o.maxBatch, realStart: time.Now()}
	b.start = b.realStart
	switch {
	case o.denyBytes == 0:
		b.dc = newDenyCache(defaultDenialCache)
	case o.denyBytes > 0:
		b.dc = newDenyCache(o.denyBytes)
	}
	if b.clock != nil {
		b.start = b.clock()
	}
	_, b.isCluster = client.(*goredis.ClusterClient)
	if b.layout == layoutSpread {
		if b.tag != "" {
			return nil, errors.New("sluice/redis: WithHashTag and WithSpread (or WithPin) exclude each other")
		}
		if _, ok := client.(*goredis.Ring); ok {
			return nil, errors.New("sluice/redis: WithSpread (or WithPin) needs a *goredis.Client or *goredis.ClusterClient, not a Ring")
		}
		b.cluster, _ = client.(*goredis.ClusterClient)
		b.keyPrefix = b.prefix + ":"
		return b, nil
	}
	tag := b.tag
	if tag == "" {
		tag = b.prefix
		if tag == "" {
			tag = defaultPrefix
		}
	}
	b.keyPrefix = b.prefix + ":{" + tag + "}:"
	return b, nil
}

// Load loads the script into the server's cache (SCRIPT LOAD), so that the
// first decision does not need a second round trip. It is optional.
func (b *Backend) Load(ctx context.Context) error {
	if err := gcraScript.Load(ctx, b.client).Err(); err != nil {
		return err
	}
	if b.cluster != nil && !b.noCross.Load() {
		if err := gcraCross.Load(ctx, b.client).Err(); err != nil {
			var rerr goredis.Error
			if !errors.As(err, &rerr) {
				return err
			}
			b.noCross.Store(true) // refused (before Redis 7): one call per slot
		}
	}
	return nil
}

// KeyPrefix returns the string every key of this backend starts with:
// "<prefix>:{<tag>}:" with one hash tag (the default), "<prefix>:" with
// WithSpread or WithPin (see Key).
func (b *Backend) KeyPrefix() string { return b.keyPrefix }

// params are one op's bucket in the script's integer units.
type params struct{ t, r, u, n int64 }

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// paramsOf converts an op's rate to exact integer ticks: with P the period
// in time units of U µs and g = gcd(P, Rate), a token is T = P/g ticks and a
// time unit R = Rate/g ticks.
func paramsOf(op stack.Op) (params, error) {
	n := max(op.Burst, 0)
	if n > maxTau {
		return params{}, fmt.Errorf("sluice/redis: bucket %q: burst %d above %d", op.Key, op.Burst, maxTau)
	}
	if op.Rate <= 0 || op.Period <= 0 {
		return params{t: 1, r: 0, u: 1, n: n}, nil
	}
	if op.Period%time.Microsecond != 0 {
		return params{}, fmt.Errorf("sluice/redis: bucket %q: period %v is not a whole number of microseconds", op.Key, op.Period)
	}
	p := int64(op.Period / time.Microsecond)
	u := int64(1)
	for {
		g := gcd(p, op.Rate)
		t, r := p/g, op.Rate/g
		if n == 0 || t <= maxTau/n {
			return params{t: t, r: r, u: u, n: n}, nil
		}
		if p%10 != 0 {
			return params{}, fmt.Errorf("sluice/redis: bucket %q: burst %d at %d per %v is too large to evaluate exactly", op.Key, op.Burst, op.Rate, op.Period)
		}
		p /= 10
		u *= 10
	}
}

// request builds the script's keys and arguments in rq (nil: fresh
// buffers). Every number is boxed as a pointer into rq.nums and every lease
// as a pointer into rq.strs (go-redis writes *int64 and *string as it writes
// int64 and string), so that building the arguments allocates nothing but
// the keys: boxing an int64 or a string into an interface allocates.
//
// In an adjustment ("a"), a give-back (negative Cost) carries, instead of
// the shadow flag, the instant of the take it undoes (Op.TakenAt) on the
// script's timeline, which bounds it (see giveBackInstant); one with a
// zero TakenAt gives nothing back. at is the adjustment's instant on the
// caller's clock (zero: now). Every op of an adjustment has a seventh
// field: for a give-back, the units of its take still outstanding
// (Op.Taken, at least -Cost), 0 otherwise.
func (b *Backend) request(rq *reqBuf, mode string, ops []stack.Op, at time.Time) ([]string, []any, error) {
	if rq == nil {
		rq = new(reqBuf)
	}
	nf := 6
	if mode == "a" {
		nf = 7
	}
	nn := 1 + nf*len(ops)
	if cap(rq.nums) < nn {
		rq.nums = make([]int64, nn)
	}
	nums := rq.nums[:nn] // never grown below: the pointers stay valid
	keys := rq.keys[:0]
	args := append(rq.args[:0], boxedMode(mode), "")
	if b.clock != nil {
		nums[0] = b.clock().UnixMicro()
		args[1] = &nums[0]
	}
	strs := rq.strs[:0]
	for _, op := range ops {
		if op.Conn {
			strs = append(strs, op.Lease)
		}
	}
	rq.strs = strs
	for i, op := range ops {
		keys = append(keys, b.redisKey(op.Key))
		shadow := argZero
		if op.Shadow {
			shadow = argOne
		}
		v := nums[1+nf*i : 1+nf*(i+1)]
		if op.Conn {
			if op.Lease == "" || op.TTL < time.Microsecond {
				return nil, nil, fmt.Errorf("sluice/redis: connections slot %q without a lease or a TTL", op.Key)
			}
			v[0], v[1], v[2] = int64(op.TTL/time.Microsecond), max(op.Burst, 0), op.Cost
			args = append(args, argZero, &v[0], &strs[0], &v[1], &v[2], shadow)
			strs = strs[1:]
			if nf == 7 {
				args = append(args, argZero)
			}
			continue
		}
		p, err := paramsOf(op)
		if err != nil {
			return nil, nil, err
		}
		v[0], v[1], v[2], v[3], v[4] = p.t, p.r, p.u, p.n, op.Cost
		if mode == "a" && op.Cost < 0 {
			var ok bool
			if v[5], ok = b.giveBackInstant(op.TakenAt, at); !ok {
				v[4] = 0 // no take to bound it by: nothing is given back
			}
			v[6] = max(op.Taken, -op.Cost)
			args = append(args, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6])
			continue
		}
		args = append(args, &v[0], &v[1], &v[2], &v[3], &v[4], shadow)
		if nf == 7 {
			args = append(args, argZero)
		}
	}
	rq.keys, rq.args = keys, args
	return keys, args, nil
}

// giveBackInstant returns the script's field for a give-back of a take at
// takenAt, made at at on the caller's clock (zero: now), and false when
// takenAt is zero (nothing may be given back).
//
// With WithClock the script's instants are that clock's, as the Stack's
// are: the field is takenAt in microseconds. On the server's time (TIME)
// the take's instant on the server's timeline is not known here: the field
// is an age, and the script places the take at now - age. The age is the
// time since the take on the caller's clock plus the backend's timeout, so
// that the estimate is never later than the take's real instant: the take
// ran on the server after the caller read takenAt, and this call runs
// there at most the timeout after the caller read at (a call that runs
// later has failed on the client side anyway). Later would give back
// refill that a take since may have handed out again; earlier only gives
// back less: a prompt give-back on the server's time returns up to the
// timeout's refill less than it took.
func (b *Backend) giveBackInstant(takenAt, at time.Time) (int64, bool) {
	if takenAt.IsZero() {
		return 0, false
	}
	if b.clock != nil {
		return takenAt.UnixMicro(), true
	}
	if at.IsZero() {
		at = time.Now()
	}
	age := max(at.Sub(takenAt), 0) + b.timeout
	return int64((age + time.Microsecond - 1) / time.Microsecond), true
}

// Strings boxed once: boxing a string variable allocates.
var (
	argZero, argOne               any = "0", "1"
	modeTake, modeAdjust, modePay any = "t", "a", "c"
)

func boxedMode(mode string) any {
	switch mode {
	case "t":
		return modeTake
	case "a":
		return modeAdjust
	case "c":
		return modePay
	}
	return mode
}

// reqBuf holds the keys and arguments of one call to the script, reused
// through reqPool by Take and Adjust.
type reqBuf struct {
	keys []string
	args []any
	nums []int64  // the numbers args points to
	strs []string // the leases args points to
}

var reqPool = sync.Pool{New: func() any { return new(reqBuf) }}

func getReq() *reqBuf { return reqPool.Get().(*reqBuf) }

// putReq returns rq to the pool once nothing refers to its buffers.
func putReq(rq *reqBuf) {
	if cap(rq.args) > 1024 {
		return // a huge decision: let it go
	}
	clear(rq.keys)
	clear(rq.args)
	clear(rq.strs[:cap(rq.strs)])
	reqPool.Put(rq)
}

// argNum returns the int64 an argument built by request holds.
func argNum(a any) (int64, bool) {
	switch v := a.(type) {
	case *int64:
		return *v, true
	case int64:
		return v, true
	}
	return 0, false
}

// mono is the backend's instant for its own timers (the probe interval,
// the rejoin period, the fallback's reports), in nanoseconds since New, at
// least 1 then: on the injected clock (WithClock) when there is one, so
// that a simulation or a test steps them as it steps decisions, and on this
// process's monotonic clock otherwise.
func (b *Backend) mono() int64 {
	if b.clock != nil {
		return int64(b.clock().Sub(b.start)) + 1
	}
	return int64(time.Since(b.start)) + 1
}

// realMono is mono on this process's monotonic clock whatever the injected
// clock: for what bounds a network call (go-redis's deadlines are real
// time).
func (b *Backend) realMono() int64 { return int64(time.Since(b.realStart)) + 1 }

// run evaluates the script and classifies a failure: an error that means
// Redis cannot decide now wraps ErrUnavailable.
func (b *Backend) run(ctx context.Context, keys []string, args []any) (*goredis.Cmd, error) {
	return b.runScript(ctx, gcraScript, keys, args)
}

func (b *Backend) runScript(ctx context.Context, script *goredis.Script, keys []string, args []any) (*goredis.Cmd, error) {
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	cmd := b.eval(cctx, script, keys, args)
	err := cmd.Err()
	if err == nil {
		return cmd, nil
	}
	if b.isCluster && ctx.Err() == nil && redirected(err) {
		// The client followed as many redirections as it may: the slot
		// is moving, as TRYAGAIN says.
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if ctx.Err() != nil || deadlinePassed(ctx) || !cannotDecide(err) {
		// The caller gave up, or the server answered an error that is not
		// about its availability (a key holding something else).
		return nil, fmt.Errorf("sluice/redis: %w", err)
	}
	return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// deadlinePassed reports whether ctx's deadline has passed. A call bounded
// by the caller's deadline (shorter than the timeout) times out reading at
// that deadline as a network timeout, which ctx may not report yet: the
// caller gave up, Redis did not fail.
func deadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// eval is script.Run (EVALSHA, then EVAL if the server lacks the script)
// without its allocations: the keys are boxed as pointers (go-redis writes
// a *string as a string; boxing a string allocates), the digest and
// source once for all, and the command's argument slice is pooled.
func (b *Backend) eval(ctx context.Context, script *goredis.Script, keys []string, args []any) *goredis.Cmd {
	sha, src := gcraSHA, gcraSrc
	if script == gcraCross {
		sha, src = gcraCrossSHA, gcraCrossSrc
	}
	bp := cmdPool.Get().(*[]any)
	a := append((*bp)[:0], "evalsha", sha, len(keys))
	for i := range keys {
		a = append(a, &keys[i])
	}
	a = append(a, args...)
	cmd := goredis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = b.client.Process(ctx, cmd)
	if err := cmd.Err(); err != nil && (errors.Is(err, goredis.ErrNoScript) || goredis.HasErrorPrefix(err, "NOSCRIPT")) {
		a[0], a[1] = "eval", src
		cmd = goredis.NewCmd(ctx, a...)
		if len(keys) > 0 {
			cmd.SetFirstKeyPos(3)
		}
		_ = b.client.Process(ctx, cmd)
	}
	// The command is done with its arguments: its reply is read, and only
	// the reply is used from here on.
	if cap(a) <= 4096 {
		clear(a)
		*bp = a[:0]
		cmdPool.Put(bp)
	}
	return cmd
}

var cmdPool = sync.Pool{New: func() any { return new([]any) }}

// The scripts' digests and sources, boxed once.
var (
	gcraSHA      any = gcraScript.Hash()
	gcraSrc      any = gcraSource
	gcraCrossSHA any = gcraCross.Hash()
	gcraCrossSrc any = gcraCrossSource
)

// callContext bounds one call by the backend's timeout. A context that can
// never be cancelled (context.Background, or a batch's) gets a shared one:
// a context with a deadline, made once per eighth of the timeout and used
// by every call that starts in that slot, so that its deadline falls
// between the timeout and 1.125 times it after the call starts. A timer per
// call (context.WithTimeout) costs more than the script itself on a busy
// machine: measured, about half the latency of a lone decision.
func (b *Backend) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() != nil {
		return context.WithTimeout(ctx, b.timeout)
	}
	slot := b.timeout / 8
	now := b.realMono() // the deadline below is real time, whatever the clock
	if sc := b.shared.Load(); sc != nil && now < sc.until {
		return sc.ctx, noCancel
	}
	b.sharedMu.Lock()
	defer b.sharedMu.Unlock()
	if sc := b.shared.Load(); sc != nil && now < sc.until {
		return sc.ctx, noCancel // another call made it meanwhile
	}
	sctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(b.timeout+slot))
	// Cancelling a context cuts the calls using it short: the one cancelled
	// here is sharedGens slots old, past its deadline (9 slots after it
	// was made), so that only its resources are released.
	i := b.sharedGen % sharedGens
	if b.sharedCancel[i] != nil {
		b.sharedCancel[i]()
	}
	b.sharedCancel[i] = cancel
	b.sharedGen++
	b.shared.Store(&sharedCtx{ctx: sctx, until: now + int64(slot)})
	return sctx, noCancel
}

// sharedGens is how many shared contexts are kept before the oldest is
// cancelled (more than the 9 slots a context lives).
const sharedGens = 10

// sharedCtx is a deadline context shared by the calls of one time slot.
type sharedCtx struct {
	ctx   context.Context
	until int64 // mono: calls starting before it may use ctx
}

func noCancel() {}

// redirected reports a MOVED or ASK reply.
func redirected(err error) bool {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// unavailableCodes are the error codes of replies by which Redis says it
// cannot decide now, though the request itself is fine: out of memory,
// busy with a script, loading its data set, a read-only or cut-off
// replica, a cluster that is down or resharding, a refused write after a
// failed save, too few replicas, and a script cache that reloading did not
// fill (go-redis retries EVALSHA with EVAL once).
var unavailableCodes = []string{"OOM", "BUSY", "LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN",
	"TRYAGAIN", "NOSCRIPT", "MISCONF", "NOREPLICAS"}

// cannotDecide reports whether err means Redis cannot decide now: any
// failure to get a reply (connection refused or reset, timeout, closed
// pool), or a reply with one of unavailableCodes (also when a script
// reports it, as "ERR Error running script … -OOM …" on Redis 6).
func cannotDecide(err error) bool {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return true // no reply: network, timeout, pool
	}
	msg := rerr.Error()
	code, _, _ := strings.Cut(msg, " ")
	if slices.Contains(unavailableCodes, code) {
		return true
	}
	if code == "ERR" && strings.Contains(msg, "Error running script") {
		for _, c := range unavailableCodes {
			if strings.Contains(msg, "-"+c+" ") {
				return true
			}
		}
	}
	return false
}

// Take implements stack.Backend: one script call for all ops.
func (b *Backend) Take(ctx context.Context, at time.Time, ops []stack.Op) (stack.Outcome, error) {
	if len(ops) == 0 {
		return stack.Outcome{Denied: -1, Remaining: []int64{}}, nil
	}
	return b.takeCached(ctx, at, ops, true)
}

// takeCached is Take; flight false skips the single flight, for a Take
// made again from inside one (the fallback's state changes), which would
// otherwise wait for its own probe.
func (b *Backend) takeCached(ctx context.Context, at time.Time, ops []stack.Op, flight bool) (stack.Outcome, error) {
	if b.dc == nil {
		return b.take(ctx, at, ops, nil)
	}
	// The clock is read only when the first op's shard holds entries: a
	// decision on buckets never denied pays no clock reading here.
	if b.dc.mayHold(&ops[0]) {
		if out, ok := b.dc.answer(ops, b.denyNow()); ok {
			return out, nil
		}
	}
	if flight && len(ops) == 1 {
		// One decision at a time asks Redis about a bucket whose entry
		// expired or was dropped; the others wait for its reply and look
		// again (a flood is then one call per RetryAfter, not a herd).
		for {
			mine, wait := b.dc.probeOrWait(&ops[0])
			if mine != nil {
				// The entry may have come back to life since the look
				// above (the previous probe's reply made it, and its
				// release cleared the probe): look again before asking.
				if out, ok := b.dc.answer(ops, b.denyNow()); ok {
					b.dc.release(ops[0].Key, mine)
					return out, nil
				}
				defer b.dc.release(ops[0].Key, mine)
				break
			}
			if wait == nil {
				break
			}
			select {
			case <-wait.done:
			case <-ctx.Done():
				return stack.Outcome{}, ctx.Err()
			}
			if out, ok := b.dc.answer(ops, b.denyNow()); ok {
				return out, nil
			}
		}
	}
	var t denyTicket
	b.dc.begin(ops, &t)
	return b.take(ctx, at, ops, &t)
}

// take is Take past the near-cache of denials; t is the cache's ticket
// (nil: no cache).
func (b *Backend) take(ctx context.Context, at time.Time, ops []stack.Op, t *denyTicket) (out stack.Outcome, err error) {
	rq := getReq()
	defer putReq(rq)
	keys, args, err := b.request(rq, "t", ops, time.Time{})
	if err != nil {
		return stack.Outcome{}, err
	}
	cacheable, callAt := false, int64(0)
	if t != nil {
		defer func() { b.dc.end(b, ops, t, out, err, cacheable, callAt) }()
	}
	if b.state.Load() != stateUp {
		return b.takeSlow(ctx, at, ops, keys, args)
	}
	if b.cluster != nil && b.share > 0 {
		return b.takeNodes(ctx, at, ops, keys, args) // a local fallback per master
	} else if b.cluster != nil {
		out, err = b.takeParts(ctx, ops, keys, args, false) // not batched: parts go to different nodes
	} else {
		out, callAt, err = b.takeBatchedAt(ctx, keys, args, len(ops))
		cacheable = err == nil
	}
	if err != nil && errors.Is(err, ErrUnavailable) && b.global() {
		b.fail(err)
		if b.share > 0 {
			return b.takeLocal(ctx, at, ops)
		}
	}
	return out, err
}

func (b *Backend) takeRedis(ctx context.Context, keys []string, args []any, nops int) (stack.Outcome, error) {
	cmd, err := b.run(ctx, keys, args)
	if err != nil {
		return stack.Outcome{}, err
	}
	vals, err := replyInts(cmd)
	if err != nil {
		return stack.Outcome{}, fmt.Errorf("sluice/redis: unexpected script reply: %w", err)
	}
	return parseOutcome(vals, nops)
}

// replyInts is the script's reply as integers. A one-bucket take that the
// script's first fast path admits replies with what the bucket holds
// alone, an integer, rather than a table: building and sending a table
// was an eighth of that call's server time. It reads as the table's form,
// {-1, 0, 0, 0, 0, held}.
func replyInts(cmd *goredis.Cmd) ([]int64, error) {
	if n, ok := cmd.Val().(int64); ok {
		return []int64{-1, 0, 0, 0, 0, n}, nil
	}
	return cmd.Int64Slice()
}

func (b *Backend) localTime(at time.Time) time.Time {
	if b.clock != nil {
		return b.clock()
	}
	return at
}

// parseOutcome decodes the script's reply.
func parseOutcome(v []int64, nops int) (stack.Outcome, error) {
	bad := func() (stack.Outcome, error) {
		return stack.Outcome{}, fmt.Errorf("sluice/redis: malformed script reply %v for %d ops", v, nops)
	}
	if len(v) == nops+1 && v[0] == -1 {
		// admitted, no shadow op over: {-1, remaining...}, shorter than
		// any full form of nops ops (at least 5 + nops elements when
		// admitted)
		return stack.Outcome{Denied: -1, Remaining: v[1:]}, nil
	}
	if len(v) < 5 {
		return bad()
	}
	ns := v[4]
	if ns < 0 || ns > int64(nops) || int64(len(v)) < 5+ns {
		return bad()
	}
	out := stack.Outcome{Denied: int(v[0]), RetryAfter: time.Duration(v[1]) * time.Microsecond,
		Permanent: v[2] != 0, OverBurst: v[3] != 0}
	if out.Denied < -1 || out.Denied >= nops || v[1] < 0 || v[1] > math.MaxInt64/int64(time.Microsecond) {
		return bad()
	}
	for _, i := range v[5 : 5+ns] {
		if i < 0 || i >= int64(nops) {
			return bad()
		}
		out.ShadowDenied = append(out.ShadowDenied, int(i))
	}
	rest := v[5+ns:]
	if out.Denied >= 0 {
		// what each bucket holds, nothing taken: present when the script's
		// fast paths decided, absent otherwise
		switch len(rest) {
		case 0:
		case nops:
			out.Remaining = rest
		default:
			return bad()
		}
		return out, nil
	}
	if len(rest) != nops {
		return bad()
	}
	out.Remaining = rest
	return out, nil
}

// Adjust implements stack.Backend: forced charges and give-backs in one
// script call. A give-back returns what its take (at Op.TakenAt) took, less
// the refill between that take and the bucket's latest take (see the
// package documentation, Give-backs). While Redis is unavailable and a
// local fallback is set, they apply to the local buckets: a charge is owed
// to Redis, a give-back returns at most what the local bucket took.
func (b *Backend) Adjust(ctx context.Context, at time.Time, ops []stack.Op) error {
	if len(ops) == 0 {
		return nil
	}
	if b.dc != nil {
		// A give-back or a settlement may make a bucket admit sooner: its
		// entry goes now, and again once the call has run (a denial
		// replied meanwhile is not cached).
		b.dc.changed(ops, false)
		defer b.dc.changed(ops, false)
	}
	rq := getReq()
	defer putReq(rq)
	keys, args, err := b.request(rq, "a", ops, at)
	if err != nil {
		return err
	}
	if b.cluster != nil && b.share > 0 {
		return b.adjustNodes(ctx, at, ops, keys, args) // a local fallback per master
	}
	if b.state.Load() == stateDown {
		if b.share > 0 {
			return b.adjustLocal(ctx, at, ops)
		}
		if err := b.downErr(); err != nil {
			return err
		}
	}
	if err := b.adjustDirect(ctx, ops, keys, args); err != nil {
		if errors.Is(err, ErrUnavailable) && b.global() {
			b.fail(err)
			if b.share > 0 {
				return b.adjustLocal(ctx, at, ops)
			}
		}
		return err
	}
	if b.state.Load() == stateDown {
		b.up() // a probe without a local fallback
	}
	return nil
}

// String describes the backend for logs.
func (b *Backend) String() string {
	return "sluice/redis(" + b.keyPrefix + ", timeout " + b.timeout.String() + ", fallback " + strconv.FormatFloat(b.share, 'g', -1, 64) + ")"
}
