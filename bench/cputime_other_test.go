//go:build !linux

package bench

// threadCPU is not available here: interleave falls back to wall time.
func threadCPU() int64 { return -1 }
