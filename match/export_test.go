package match

// The bounds of a ConfigError, for the tests of package match_test.
const (
	MaxProblems   = maxProblems
	ErrorProblems = errorProblems
)
