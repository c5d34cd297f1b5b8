// Package redisstat measures a redis-server for the benchmarks of the redis
// and envoyrls modules: its process's CPU time and its per-command counts,
// read from INFO text the caller fetches (this module does not depend on a
// Redis client). It was redistest's CPUTime, ProcessCPUTime and
// CommandStats, which no user of redistest needs.
package redisstat

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times.
const clockTicks = 100

// ProcessCPUTime returns the CPU time, user and system, process pid has
// used so far, from /proc/<pid>/stat (in steps of 10 ms), and false when it
// cannot be read. Unlike INFO commandstats, for a redis-server it counts
// all the server's work: reading requests, writing replies, the event loop,
// besides running the commands.
func ProcessCPUTime(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStatCPU(string(data))
}

// parseStatCPU reads utime + stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name before them, in parentheses, may
// hold spaces and parentheses itself.
func parseStatCPU(stat string) (time.Duration, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || ut < 0 || st < 0 {
		return 0, false
	}
	return time.Duration(ut+st) * (time.Second / clockTicks), true
}

// PID returns the process_id line of INFO server text, and false when
// there is none.
func PID(info string) (int, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			return pid, err == nil && pid > 0
		}
	}
	return 0, false
}

// CommandStat is one command's line of INFO commandstats.
type CommandStat struct {
	// Calls is how many times the command ran; Usec the microseconds the
	// server spent running it.
	Calls, Usec int64
}

// CommandStats parses INFO commandstats text, by command name as Redis
// writes it ("evalsha", "incrby"): counts since the server started or the
// last CONFIG RESETSTAT.
func CommandStats(info string) map[string]CommandStat {
	out := map[string]CommandStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var cs CommandStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				cs.Calls = x
			case "usec":
				cs.Usec = x
			}
		}
		out[name] = cs
	}
	return out
}
