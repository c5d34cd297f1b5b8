package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
)

// replyError is a server reply error, as go-redis types them.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// The replies that cannot be provoked on a single test server (LOADING,
// CLUSTERDOWN, TRYAGAIN, a NOSCRIPT that EVAL did not cure) are classified
// like those that can; replies about the request itself are not.
func TestCannotDecide(t *testing.T) {
	yes := []error{
		replyError("LOADING Redis is loading the dataset in memory"),
		replyError("CLUSTERDOWN The cluster is down"),
		replyError("TRYAGAIN Multiple keys request during rehashing of slot"),
		replyError("NOSCRIPT No matching script. Please use EVAL."),
		replyError("OOM command not allowed when used memory > 'maxmemory'. script: 1f2e, on @user_script:150."),
		replyError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or FUNCTION KILL."),
		replyError("READONLY You can't write against a read only replica."),
		replyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
		replyError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."),
		replyError("NOREPLICAS Not enough good replicas to write."),
		replyError("ERR Error running script (call to f_1f2e): @user_script:150: -OOM command not allowed when used memory > 'maxmemory'"),
		fmt.Errorf("wrapped: %w", replyError("LOADING Redis is loading the dataset in memory")),
		context.DeadlineExceeded,
		&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")},
		errors.New("redis: client is closed"),
	}
	no := []error{
		replyError("WRONGTYPE Operation against a key holding the wrong kind of value"),
		replyError("ERR sluice: key k does not hold a sluice bucket"),
		replyError("ERR Error running script (call to f_1f2e): @user_script:1: user_script:1: attempt to compare nil"),
		replyError("OOMPH not a code we know"),
	}
	for _, err := range yes {
		if !cannotDecide(err) {
			t.Errorf("cannotDecide(%q) = false, want true", err)
		}
	}
	for _, err := range no {
		if cannotDecide(err) {
			t.Errorf("cannotDecide(%q) = true, want false", err)
		}
	}
}
