//go:build race

package errors_test

const raceEnabled = true
