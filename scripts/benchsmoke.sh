#!/usr/bin/env bash
# Benchmark smoke: runs the interleaved comparisons of the hot paths briefly
# and compares each sluice ÷ peer ratio with the one recorded in
# bench/smoke.txt. A ratio more than 10% above its record is reported as a
# warning: the machine is noisy, so the smoke never fails the build. Ratios,
# not times, are compared: both sides of a ratio ran in the same rounds.
#
#   bash scripts/benchsmoke.sh            # warn on regressions
#   bash scripts/benchsmoke.sh --record   # print fresh records for bench/smoke.txt
set -uo pipefail
cd "$(dirname "$0")/.."
record=false
[ "${1:-}" = --record ] && record=true
tolerance=1.10

# One line per measured ratio: "module benchmark metric value".
measure() {
	local mod=$1 bench=$2 n=$3
	(cd "$mod" && go test -run '^$' -bench "$bench" -benchtime "${n}x" . 2>/dev/null) |
		awk -v mod="$mod" '/^Benchmark/ { name=$1; sub(/-[0-9]+$/, "", name); for (i = 3; i < NF; i++) if ($(i+1) ~ /\// && $(i+1) !~ /\/op$/) print mod, name, $(i+1), $i }'
}
# The middlewares: the ratio lines their comparison prints, per request for
# httplimit ÷ httprate and of the cost added to the bare handler for
# grpclimit ÷ ratelimit (issue 25's two rows).
middleware() {
	(cd bench/middleware && go test -run '^$' -bench 'GRPCInterceptor$|HTTP$/handler=typed' -benchtime 100ms -rounds 3 . 2>/dev/null) |
		awk '/^HTTP, handler typed:/ { sec = "http" }
			/^gRPC interceptor alone:/ { sec = "grpc" }
			sec == "http" && $1 == "sluice" && $3 == "httprate:" { print "bench/middleware BenchmarkHTTP/handler=typed sluice/httprate-per-request", $4 + 0 }
			sec == "grpc" && $1 == "sluice" && $3 == "ratelimit:" { print "bench/middleware BenchmarkGRPCInterceptor sluice/ratelimit-added", $7 + 0 }'
}
# One contended bucket: sluice's median ÷ uber's, as bench/cmd/benchtab
# tabulates the rounds (the uber column's ratio).
contended() {
	(cd bench && go test -run '^$' -bench 'OneBucketParallel$' -benchtime 100ms -rounds 5 . 2>/dev/null) |
		go run ./bench/cmd/benchtab |
		awk -F'|' '/OneBucketParallel — median/ { on = 1; next }
			on && /^\| case/ { for (i = 1; i <= NF; i++) if ($i ~ /^ *uber *$/) col = i; next }
			on && col && /^\| [^-]/ { if (match($col, /\([0-9.]+\)/)) print "bench BenchmarkOneBucketParallel sluice/uber", substr($col, RSTART + 1, RLENGTH - 2); exit }'
}
results=$( {
	measure stack 'BenchmarkOneLimit$' 30000
	measure stack 'BenchmarkGateway$/real' 20000
	measure bench 'BenchmarkOneLimit$' 30000
	middleware
	contended
} )
if [ -z "$results" ]; then
	echo "benchsmoke: warning: no benchmark produced a ratio"
	exit 0
fi
if $record; then
	echo "$results"
	exit 0
fi
warned=0
while read -r mod name metric value; do
	want=$(awk -v m="$mod" -v n="$name" -v x="$metric" '$1 == m && $2 == n && $3 == x { print $4 }' bench/smoke.txt)
	if [ -z "$want" ]; then
		continue # not a recorded ratio (a floor or another peer)
	fi
	if awk -v v="$value" -v w="$want" -v t="$tolerance" 'BEGIN { exit !(v > w * t) }'; then
		echo "benchsmoke: warning: $mod $name $metric = $value, recorded $want (more than 10% behind)"
		warned=1
	else
		echo "benchsmoke: ok: $mod $name $metric = $value (recorded $want)"
	fi
done <<<"$results"
[ "$warned" -eq 0 ] || echo "benchsmoke: rerun on a quiet machine before reading a warning as a regression"
exit 0
