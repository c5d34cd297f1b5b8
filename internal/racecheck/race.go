//go:build race

package racecheck

// Enabled reports whether the binary was built with -race, which changes
// allocation counts; allocation assertions are skipped under it.
const Enabled = true
