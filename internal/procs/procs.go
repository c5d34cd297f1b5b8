// Package procs tracks the redis-server processes redistest starts, so
// that the redis module's TestMain can report any left running.
package procs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// started are the processes redistest.Start and Server.Restart started and have not seen
// exit, by PID, with the name of the test that started each.
var (
	startedMu sync.Mutex
	started   = map[int]string{}
)

// VerifyExited returns an error naming every redis-server that Start or
// Restart started in this process and that has not exited (with its PID
// and the test that started it), nil when there is none. Call it after
// m.Run in TestMain: a server left running outlives the tests, and holds
// its port and memory. A server that exited on its own is reaped here.
func VerifyExited() error {
	startedMu.Lock()
	defer startedMu.Unlock()
	var alive []string
	for pid, test := range started {
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); got == pid || errors.Is(err, syscall.ECHILD) {
			delete(started, pid) // exited: reaped now, or by someone else
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			delete(started, pid)
			continue
		}
		alive = append(alive, fmt.Sprintf("redis-server PID %d started by %s", pid, test))
	}
	if len(alive) == 0 {
		return nil
	}
	slices.Sort(alive)
	return fmt.Errorf("redistest: %d redis-server still running after the tests: %s", len(alive), strings.Join(alive, "; "))
}

// Track records pid as started by test.
func Track(pid int, test string) {
	startedMu.Lock()
	started[pid] = test
	startedMu.Unlock()
}

// Untrack forgets pid (it exited, or was stopped).
func Untrack(pid int) {
	startedMu.Lock()
	delete(started, pid)
	startedMu.Unlock()
}
