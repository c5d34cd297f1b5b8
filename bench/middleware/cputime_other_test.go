//go:build !linux

package middleware

// processCPU is not available here: compare reports wall time only.
func processCPU() int64 { return -1 }
