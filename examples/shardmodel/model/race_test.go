//go:build race

package model

// raceEnabled reports whether the tests run under -race, which changes allocation counts.
const raceEnabled = true
