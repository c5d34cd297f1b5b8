package redistest

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/procs"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := procs.VerifyExited(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	os.Exit(code)
}
