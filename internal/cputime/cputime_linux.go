// Package cputime reads the CPU time a benchmark used, for comparisons on
// a machine shared with other work: CPU time is what one side of a
// comparison used, where wall time also counts waiting for a core.
package cputime

import (
	"syscall"
	"unsafe"
)

// Thread returns the CPU time the calling OS thread has used, in ns
// (CLOCK_THREAD_CPUTIME_ID, exact to the scheduler's accounting), or -1.
// Lock the goroutine to its thread (runtime.LockOSThread) around what it
// measures.
func Thread() int64 { return clock(3) } // CLOCK_THREAD_CPUTIME_ID

// Process returns the CPU time the whole process has used, in ns
// (CLOCK_PROCESS_CPUTIME_ID), or -1.
func Process() int64 { return clock(2) } // CLOCK_PROCESS_CPUTIME_ID

func clock(id uintptr) int64 {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, id, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return -1
	}
	return ts.Nano()
}
