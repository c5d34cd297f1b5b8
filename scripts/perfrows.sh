#!/usr/bin/env bash
# Reruns every comparison behind README.md's "Performance" table, each in
# one invocation with its sides interleaved round by round, and writes the
# raw outputs to a folder (default: a new one under /tmp), one file a row:
#
#   bash scripts/perfrows.sh [DIR]
#
# Run it on a quiet machine (nothing else using the cores: `uptime` near 0)
# and read the ratios, not the times; BENCHMARKS.md says what each side is.
# It takes two to three minutes on the 2-core benchmark machine. The Redis
# rows are not rerun here (their commands are in BENCHMARKS.md, "Redis
# backend"): they need a redis-server and measure the server's time.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/sluice-perfrows.XXXXXX")}
mkdir -p "$out"
run() {
	local name=$1
	shift
	echo "== $name: $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
	"$@" >"$out/$name.txt" 2>&1 || { echo "perfrows: $name failed, see $out/$name.txt"; exit 1; }
}
# One per-caller limit through Limiter.Allow, 10,000 and 100,000 callers
# (and 10,000 from 16 goroutines), against go-limiter and a mutex map of
# x/time/rate, with the floor sides.
run onelimit go test ./bench -run '^$' -bench 'OneLimit$|OneLimitParallel$' -benchmem -benchtime 200000x -count 3
# What the API's shape costs, against smaller shapes.
run apishape go test ./bench -run '^$' -bench 'APIShape$' -benchtime 2000000x -count 3
# The gateway stack (3 limits) against the same written by hand.
run gateway go test ./stack/ -run '^$' -bench 'Gateway$|GatewayGap$' -benchtime 20000x -count 3
# The middlewares against their peers, with the floors of each.
run middleware bash -c "cd bench/middleware && go test -run '^$' -bench 'GRPCInterceptor$|HTTP$' -benchtime 300ms -rounds 7"
# The keyed table and one contended bucket against their peers.
run buckets bash -c "go test ./bench -run '^$' -bench 'Table|OneBucket' -benchmem -benchtime 200ms -rounds 5 | go run ./bench/cmd/benchtab"
echo "perfrows: outputs in $out"
