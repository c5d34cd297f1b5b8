//go:build race

package lincheck

const raceEnabled = true
