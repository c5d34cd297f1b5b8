package middleware

import (
	"syscall"
	"unsafe"
)

// processCPU returns the CPU time the whole process has used, in ns
// (CLOCK_PROCESS_CPUTIME_ID: every thread, the collector's workers too), or
// -1. On a machine shared with other work, CPU time is what one side of a
// comparison used, where wall time also counts waiting for a core.
func processCPU() int64 {
	const clockProcessCPUTime = 2 // CLOCK_PROCESS_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return -1
	}
	return ts.Nano()
}
