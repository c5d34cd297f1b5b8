//go:build race

package otelattr_test

const raceEnabled = true
