#!/usr/bin/env bash
# Deterministic cost of one benchmark operation, for changes too small for
# this noisy machine's clocks: runs the benchmark under valgrind's callgrind
# with a cache simulation at N and 3N iterations and prints the difference
# per operation, so that setup and warm-up cancel out:
#
#   Ir    instructions executed
#   I1mr  first-level instruction cache misses (32 KiB, as the host's;
#         CGCOUNT_I1=65536 simulates 64 KiB, to tell a footprint just over
#         32 KiB from misses of code that is new to each operation)
#   D1mr  first-level data cache read misses
#   DLmr  last-level data read misses, of a 2 MiB last level (a core's share
#         of a busy host's cache, where these reads go to memory)
#   DLmw  last-level data write misses (mostly fresh allocations zeroed)
#
#   bash scripts/cgcount.sh DIR BENCH [N] [TEST FLAGS...]
#   bash scripts/cgcount.sh bench/middleware 'HTTPFloor$/round=1/side=sluice$' 50000 -rounds 1
#   bash scripts/cgcount.sh bucket 'AllowN$/sluice$' 200000
#
# DIR is the package directory (a nested module's package too); BENCH must
# select one benchmark (one side of bench/middleware's comparisons, with
# -rounds 1). The run has one P (GOMAXPROCS=1), so the collector's work is
# counted in the operation's; GOGC is left as it is. It needs valgrind
# (Debian's package of that name) and takes about a minute per 100,000
# operations of an HTTP request.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
	echo "usage: bash scripts/cgcount.sh DIR BENCH [N] [TEST FLAGS...]" >&2
	exit 2
fi
dir=$1 bench=$2 n=${3:-100000}
shift $(($# < 3 ? $# : 3))
command -v valgrind >/dev/null || { echo "cgcount: needs valgrind" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$dir" && go test -c -o "$tmp/b.test" .)
run() { # iterations, test flags
	local it=$1
	shift
	(cd "$dir" && GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off GOMAXPROCS=1 valgrind --tool=callgrind \
		--cache-sim=yes --I1="${CGCOUNT_I1:-32768}",8,64 --D1=32768,8,64 --LL=2097152,16,64 \
		--callgrind-out-file="$tmp/cg.$it" "$tmp/b.test" -test.run '^$' -test.bench "$bench" \
		-test.benchtime "${it}x" "$@" >"$tmp/out.$it" 2>"$tmp/err.$it") ||
		{ cat "$tmp/out.$it" "$tmp/err.$it" >&2; exit 1; }
	if [ "$(grep -c '^Benchmark.*/op' "$tmp/out.$it")" -ne 1 ]; then
		echo "cgcount: $bench must select exactly one benchmark; it ran:" >&2
		grep '^Benchmark' "$tmp/out.$it" >&2 || echo "(none)" >&2
		exit 1
	fi
	grep '^summary:' "$tmp/cg.$it" | cut -d' ' -f2-
}
a=$(run "$n" "$@")
b=$(run $((3 * n)) "$@")
events=$(grep '^events:' "$tmp/cg.$n" | cut -d' ' -f2-)
awk -v e="$events" -v a="$a" -v b="$b" -v n="$((2 * n))" -v name="$bench" 'BEGIN {
	k = split(e, ev, " "); split(a, x, " "); split(b, y, " ")
	printf "%s, per operation:", name
	for (i = 1; i <= k; i++) if (ev[i] ~ /^(Ir|I1mr|D1mr|DLmr|DLmw)$/) printf "  %s %.1f", ev[i], (y[i] - x[i]) / n
	printf "\n"
}'
