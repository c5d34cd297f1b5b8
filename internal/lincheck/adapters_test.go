package lincheck

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/bucket"
)

// This file is the only place that knows how each subject takes and gives
// back: every test drives the real code through these adapters.

// grant is what a take leaves its caller for giving back.
type grant struct {
	at  time.Time
	res bucket.Result
	ref *refGrant // the reference bucket's (reference_test.go)
}

// target is one bucket under test: a Bucket, or a Table with the key a
// caller uses.
type target interface {
	take(key string, at time.Time, n int) (ok bool, remaining int64, g grant)
	giveBack(key string, g *grant, n int) error
}

// form is one public way of taking and giving back.
type form struct {
	name  string
	table bool
	// unsafe marks a give-back known to hand out tokens that were never
	// refilled: the checkers must catch it.
	unsafe bool
	make   func(r rate.Limit, burst int) target
}

// forms lists every public give-back form.
var forms = []form{
	{name: "Bucket.RefundN", unsafe: true, make: func(r rate.Limit, b int) target { return bucketRefundN{bucket.New(r, b)} }},
	{name: "Bucket.RefundTake", unsafe: true, make: func(r rate.Limit, b int) target { return bucketRefundTake{bucket.New(r, b)} }},
	{name: "Table.RefundN", table: true, unsafe: true, make: func(r rate.Limit, b int) target { return tableRefundN{bucket.NewTable(r, b)} }},
	{name: "Table.RefundBytes", table: true, unsafe: true, make: func(r rate.Limit, b int) target { return tableRefundBytes{bucket.NewTable(r, b)} }},
	{name: "Table.RefundTakeBytes", table: true, unsafe: true, make: func(r rate.Limit, b int) target { return tableRefundTakeBytes{bucket.NewTable(r, b)} }},
}

// Each give-back is given at the instant of the take it undoes, as a stack
// does when a later limit denies.

type bucketRefundN struct{ b *bucket.Bucket }

func (x bucketRefundN) take(_ string, at time.Time, n int) (bool, int64, grant) {
	ok, rem := x.b.TryTakeN(at, n)
	return ok, rem, grant{at: at}
}
func (x bucketRefundN) giveBack(_ string, g *grant, n int) error {
	x.b.RefundN(g.at, n)
	return nil
}

type bucketRefundTake struct{ b *bucket.Bucket }

func (x bucketRefundTake) take(_ string, at time.Time, n int) (bool, int64, grant) {
	res := x.b.TakeN(at, n)
	return res.OK, res.Remaining, grant{at: at, res: res}
}
func (x bucketRefundTake) giveBack(_ string, g *grant, n int) error {
	x.b.RefundTake(g.res, g.at, n)
	return nil
}

type tableRefundN struct{ t *bucket.Table }

func (x tableRefundN) take(key string, at time.Time, n int) (bool, int64, grant) {
	ok, rem := x.t.TryTakeN(key, at, n)
	return ok, rem, grant{at: at}
}
func (x tableRefundN) giveBack(key string, g *grant, n int) error {
	x.t.RefundN(key, g.at, n)
	return nil
}

type tableRefundBytes struct{ t *bucket.Table }

func (x tableRefundBytes) take(key string, at time.Time, n int) (bool, int64, grant) {
	ok, rem := x.t.TryTakeBytes([]byte(key), at, n)
	return ok, rem, grant{at: at}
}
func (x tableRefundBytes) giveBack(key string, g *grant, n int) error {
	x.t.RefundBytes([]byte(key), g.at, n)
	return nil
}

type tableRefundTakeBytes struct{ t *bucket.Table }

func (x tableRefundTakeBytes) take(key string, at time.Time, n int) (bool, int64, grant) {
	res := x.t.TakeBytes([]byte(key), at, n)
	return res.OK, res.Remaining, grant{at: at, res: res}
}
func (x tableRefundTakeBytes) giveBack(key string, g *grant, n int) error {
	x.t.RefundTakeBytes([]byte(key), g.res, g.at, n)
	return nil
}
