//go:build !linux

// Package cputime reads the CPU time a benchmark used, for comparisons on
// a machine shared with other work. Outside Linux it has no clock: callers
// fall back to wall time.
package cputime

// Thread returns -1: the thread's CPU time is not read on this system.
func Thread() int64 { return -1 }

// Process returns -1: the process's CPU time is not read on this system.
func Process() int64 { return -1 }
