package lincheck

import (
	"math"
	"time"

	"golang.org/x/time/rate"

	pub "github.com/sluicehq/sluice/bucket"
	"github.com/sluicehq/sluice/internal/bucket"
)

// This file is the only place that knows how each subject takes and gives
// back: every test drives the real code through these adapters.

// grant is what a take leaves its caller for giving back.
type grant struct {
	at   time.Time
	g    bucket.Grant
	pg   pub.Grant // the public package's
	ref  *refGrant // the reference bucket's (reference_test.go)
	left int64     // units still outstanding, for targets that pass them (nodeTarget)
}

// target is one bucket under test: a Bucket, or a Table with the key a
// caller uses.
type target interface {
	take(key string, at time.Time, n int) (ok bool, remaining int64, g grant)
	giveBack(key string, g *grant, n int) error
}

// charger is a target that can also charge: take n at at unconditionally,
// into debt if need be.
type charger interface {
	charge(key string, at time.Time, n int)
}

// onBucket and onTable hold the subject of an adapter, and charge it.
type onBucket struct{ b *bucket.Bucket }

func (x onBucket) charge(_ string, at time.Time, n int) { x.b.ChargeN(at, n) }

type onTable struct{ t *bucket.Table }

func (x onTable) charge(key string, at time.Time, n int) { x.t.ChargeN(at, key, n) }

// form is one public way of taking and giving back.
type form struct {
	name  string
	table bool
	// unsafe marks a give-back known to hand out tokens that were never
	// refilled: the checkers must catch it.
	unsafe bool
	make   func(r rate.Limit, burst int) target
}

// forms lists every public give-back form: the Grant TryTakeGrant writes or
// TakeN's Result holds, or one GrantFor rebuilds from the take's instant
// and count, given back through the Bucket or the Table (by string
// or by bytes).
var forms = []form{
	{name: "Bucket.TryTakeGrant+GiveBack", make: func(r rate.Limit, b int) target { return bucketTry{onBucket{bucket.New(r, b)}} }},
	{name: "Bucket.TakeN+GiveBack", make: func(r rate.Limit, b int) target { return bucketTake{onBucket{bucket.New(r, b)}} }},
	{name: "Bucket.GrantFor+GiveBack", make: func(r rate.Limit, b int) target { return bucketGrantFor{onBucket{bucket.New(r, b)}} }},
	{name: "Bucket.AllowN+GrantFor+GiveBack", make: func(r rate.Limit, b int) target { return bucketAllow{onBucket{bucket.New(r, b)}} }},
	{name: "Table.TryTakeGrant+GiveBack", table: true, make: func(r rate.Limit, b int) target { return tableTry{onTable{bucket.NewTable(r, b)}} }},
	{name: "Table.TakeN+GiveBack", table: true, make: func(r rate.Limit, b int) target { return tableTake{onTable{bucket.NewTable(r, b)}} }},
	{name: "Table.GrantFor+GiveBack", table: true, make: func(r rate.Limit, b int) target { return tableGrantFor{onTable{bucket.NewTable(r, b)}} }},
	{name: "Table.TryTakeGrantBytes+GiveBackBytes", table: true, make: func(r rate.Limit, b int) target { return tableBytes{onTable{bucket.NewTable(r, b)}} }},
	{name: "Table.AllowN+GrantFor+GiveBack", table: true, make: func(r rate.Limit, b int) target { return tableAllow{onTable{bucket.NewTable(r, b)}} }},
	// The public package's forms, over the same implementation.
	{name: "bucket.Bucket.TakeAt+GiveBack", make: func(r rate.Limit, b int) target { return pubBucket{pub.New(r, b)} }},
	{name: "bucket.Table.TakeAt+GiveBack", table: true, make: func(r rate.Limit, b int) target { return pubTable{pub.NewTable(r, b)} }},
}

type pubBucket struct{ b *pub.Bucket }

func (x pubBucket) take(_ string, at time.Time, n int) (bool, int64, grant) {
	res := x.b.TakeAt(at, n)
	return res.OK, res.Remaining, grant{at: at, pg: res.Grant}
}
func (x pubBucket) giveBack(_ string, g *grant, n int) error { return x.b.GiveBack(&g.pg, n) }

type pubTable struct{ t *pub.Table }

func (x pubTable) take(key string, at time.Time, n int) (bool, int64, grant) {
	res := x.t.TakeAt(at, key, n)
	return res.OK, res.Remaining, grant{at: at, pg: res.Grant}
}
func (x pubTable) giveBack(key string, g *grant, n int) error { return x.t.GiveBack(key, &g.pg, n) }

// remainingUnknown is the remaining a take reports when its form does not
// say (AllowN reports only whether it took): the check of Remaining is
// skipped.
const remainingUnknown = math.MinInt64

// takeDecision is the Decision a take of a target records.
func takeDecision(ok bool, remaining int64) Decision {
	return Decision{OK: ok, Remaining: remaining, RemainingUnknown: remaining == remainingUnknown}
}

type bucketTry struct{ onBucket }

func (x bucketTry) take(_ string, at time.Time, n int) (bool, int64, grant) {
	g := grant{at: at}
	ok, rem := x.b.TryTakeGrant(at, n, &g.g)
	return ok, rem, g
}
func (x bucketTry) giveBack(_ string, g *grant, n int) error { return x.b.GiveBack(&g.g, n) }

type bucketTake struct{ onBucket }

func (x bucketTake) take(_ string, at time.Time, n int) (bool, int64, grant) {
	res := x.b.TakeN(at, n)
	return res.OK, res.Remaining, grant{at: at, g: res.Grant}
}
func (x bucketTake) giveBack(_ string, g *grant, n int) error { return x.b.GiveBack(&g.g, n) }

type bucketGrantFor struct{ onBucket }

func (x bucketGrantFor) take(_ string, at time.Time, n int) (bool, int64, grant) {
	ok, rem := x.b.TryTakeN(at, n)
	if !ok {
		return false, rem, grant{}
	}
	return true, rem, grant{at: at, g: x.b.GrantFor(at, n)}
}
func (x bucketGrantFor) giveBack(_ string, g *grant, n int) error { return x.b.GiveBack(&g.g, n) }

// bucketAllow takes with AllowN, the lock-free take without a report
// (Bucket.Allow's path), which reports no remaining.
type bucketAllow struct{ onBucket }

func (x bucketAllow) take(_ string, at time.Time, n int) (bool, int64, grant) {
	if !x.b.AllowN(at, n) {
		return false, remainingUnknown, grant{}
	}
	return true, remainingUnknown, grant{at: at, g: x.b.GrantFor(at, n)}
}
func (x bucketAllow) giveBack(_ string, g *grant, n int) error { return x.b.GiveBack(&g.g, n) }

type tableTry struct{ onTable }

func (x tableTry) take(key string, at time.Time, n int) (bool, int64, grant) {
	g := grant{at: at}
	ok, rem := x.t.TryTakeGrant(at, key, n, &g.g)
	return ok, rem, g
}
func (x tableTry) giveBack(key string, g *grant, n int) error { return x.t.GiveBack(key, &g.g, n) }

type tableTake struct{ onTable }

func (x tableTake) take(key string, at time.Time, n int) (bool, int64, grant) {
	res := x.t.TakeN(at, key, n)
	return res.OK, res.Remaining, grant{at: at, g: res.Grant}
}
func (x tableTake) giveBack(key string, g *grant, n int) error { return x.t.GiveBack(key, &g.g, n) }

type tableGrantFor struct{ onTable }

func (x tableGrantFor) take(key string, at time.Time, n int) (bool, int64, grant) {
	ok, rem := x.t.TryTakeN(at, key, n)
	if !ok {
		return false, rem, grant{}
	}
	return true, rem, grant{at: at, g: x.t.GrantFor(at, key, n)}
}
func (x tableGrantFor) giveBack(key string, g *grant, n int) error {
	return x.t.GiveBack(key, &g.g, n)
}

type tableBytes struct{ onTable }

func (x tableBytes) take(key string, at time.Time, n int) (bool, int64, grant) {
	g := grant{at: at}
	ok, rem := x.t.TryTakeGrantBytes(at, []byte(key), n, &g.g)
	return ok, rem, g
}
func (x tableBytes) giveBack(key string, g *grant, n int) error {
	return x.t.GiveBackBytes([]byte(key), &g.g, n)
}
func (x tableBytes) charge(key string, at time.Time, n int) { x.t.ChargeBytes(at, []byte(key), n) }

// tableAllow takes with AllowN, the Table's take under its shard's lock
// without a compare-and-swap, which reports no remaining.
type tableAllow struct{ onTable }

func (x tableAllow) take(key string, at time.Time, n int) (bool, int64, grant) {
	if !x.t.AllowN(at, key, n) {
		return false, remainingUnknown, grant{}
	}
	return true, remainingUnknown, grant{at: at, g: x.t.GrantFor(at, key, n)}
}
func (x tableAllow) giveBack(key string, g *grant, n int) error { return x.t.GiveBack(key, &g.g, n) }
