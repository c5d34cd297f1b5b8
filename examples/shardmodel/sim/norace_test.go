//go:build !race

package sim

// raceEnabled reports whether the tests run under -race, which slows the
// simulation about fifteenfold; the statistical tests then simulate less.
const raceEnabled = false
