// Package stackhook carries what package stack lends the repository's other
// engines without exporting it: functions whose signatures name internal
// types, which would be plumbing in stack's public API.
package stackhook

// DecideOps is stack's in-memory decider on a caller's buckets, set by
// package stack when it is initialized, as a
//
//	func(at time.Time, ops []stack.Op, table func(op *stack.Op) (*bucket.Table, error)) (stack.Outcome, error)
//
// (bucket being internal/bucket). It is typed any because this package
// cannot import stack, which imports it; a user asserts the type once. See
// stack's decideOps for what it does.
var DecideOps any
