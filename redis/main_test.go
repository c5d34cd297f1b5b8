package redis_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/procs"
)

// TestMain fails the run when a redis-server a test started is still
// running once every test has ended.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := procs.VerifyExited(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	os.Exit(code)
}
