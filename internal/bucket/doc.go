// Package bucket is the implementation of the public package
// github.com/sluicehq/sluice/bucket and the form of it that sluice's
// engines (stack, category, envoyrls, the Redis backend's local fallback)
// use: the same Bucket and Table with their plumbing exported — takes at
// an explicit instant reporting in registers (TryTakeN, TryTakeGrant),
// keys as bytes (the *Bytes family), give-backs recorded by the caller
// (GrantFor), unconditional charges (ChargeN) and atomic reconfiguration.
// The public package wraps it with the user's API; its documentation
// (github.com/sluicehq/sluice/bucket) states the semantics, which are
// this package's.
//
// Every method whose name carries no instant reads the clock given with
// WithClock (nil: internal/monoclock).
package bucket
