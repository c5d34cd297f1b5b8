// Package redisbucket is a stack.Backend computing sluice's GCRA decisions
// inside Redis.
package redisbucket
