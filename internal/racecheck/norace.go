//go:build !race

// Package racecheck tells tests whether the race detector is on.
package racecheck

// Enabled reports whether the binary was built with -race, which changes
// allocation counts; allocation assertions are skipped under it.
const Enabled = false
