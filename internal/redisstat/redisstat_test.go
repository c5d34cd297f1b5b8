package redisstat

import (
	"os"
	"testing"
	"time"
)

// utime and stime are read after the command name, whatever it holds.
func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want time.Duration
		ok   bool
	}{
		{"4242 (redis-server) S 1 2 3 0 -1 4194560 1 0 0 0 150 25 0 0 20 0 5 0 1 2 3", 1750 * time.Millisecond, true},
		{"4242 (a) b) (c) R 1 2 3 0 -1 4194560 1 0 0 0 7 3 0 0 20 0 5 0 1 2 3", 100 * time.Millisecond, true},
		{"4242 (redis-server) S 1 2", 0, false},
		{"no parenthesis", 0, false},
		{"4242 (x) S 1 2 3 0 -1 4194560 1 0 0 0 -1 3 0", 0, false},
	} {
		got, ok := parseStatCPU(tc.stat)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStatCPU(%q) = %v, %v; want %v, %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
}

// This process's own CPU time reads where there is a /proc.
func TestProcessCPUTime(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, ok := ProcessCPUTime(os.Getpid()); !ok {
		t.Error("this process's CPU time: not read")
	}
	if _, ok := ProcessCPUTime(-1); ok {
		t.Error("PID -1: read")
	}
}

func TestParseInfo(t *testing.T) {
	info := "# Server\r\nredis_version:7.2.4\r\nprocess_id:4242\r\n\r\n# Commandstats\r\n" +
		"cmdstat_incr:calls=5,usec=12,usec_per_call=2.40,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=3,usec_per_call=3.00\r\n"
	if pid, ok := PID(info); pid != 4242 || !ok {
		t.Errorf("PID = %d, %v; want 4242, true", pid, ok)
	}
	if _, ok := PID("# Server\r\n"); ok {
		t.Error("PID of text without process_id: found")
	}
	st := CommandStats(info)
	if len(st) != 2 || st["incr"] != (CommandStat{Calls: 5, Usec: 12}) || st["config|resetstat"].Calls != 1 {
		t.Errorf("CommandStats = %v", st)
	}
}
