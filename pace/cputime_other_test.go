//go:build !linux

package pace_test

func threadCPU() int64 { return -1 }
