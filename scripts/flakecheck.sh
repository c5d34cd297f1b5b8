#!/usr/bin/env bash
# Flakiness check: every module's tests with -race, N times, while two busy
# loops keep both cores loaded, in a shuffled order whose seed is printed.
#
#   bash scripts/flakecheck.sh [N]      N runs (default 5)
#
# Environment:
#   FLAKECHECK_MODULES   space-separated module directories to test instead
#                        of all of them (e.g. "./grpclimit ./envoyrls")
#   FLAKECHECK_RUN       a -run pattern, to repeat one test
#   FLAKECHECK_LOGS      where to keep each run's output (default: a
#                        temporary directory, printed at the end)
#
# Each failure is reported on one line with its run, module, package, test
# and the -test.shuffle seed that replays the order:
#   (cd MODULE && go test -race -count=1 -shuffle=SEED -run 'TEST$' PACKAGE)
# The last line is "flakecheck: N runs, F failures"; the exit status is
# non-zero if F > 0.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${1:-5}
case "$runs" in
'' | *[!0-9]* | 0) echo "usage: bash scripts/flakecheck.sh [N ≥ 1]" >&2; exit 2 ;;
esac
if [ -n "${FLAKECHECK_MODULES:-}" ]; then
	read -r -a modules <<<"$FLAKECHECK_MODULES"
else
	mapfile -t modules < <(find . -name go.mod -not -path '*/testdata/*' -printf '%h\n' | sort)
fi
logs=${FLAKECHECK_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/flakecheck.XXXXXX")}
mkdir -p "$logs"
runargs=()
[ -z "${FLAKECHECK_RUN:-}" ] || runargs=(-run "$FLAKECHECK_RUN")

# Two busy loops, one per core of the machine this was written for, killed
# however the script ends.
busy=()
stop_busy() {
	local p
	for p in "${busy[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${busy[@]}"; do wait "$p" 2>/dev/null; done
	busy=()
}
trap stop_busy EXIT
trap 'stop_busy; exit 130' INT TERM
for _ in 1 2; do
	sh -c 'while :; do :; done' &
	busy+=("$!")
done

# failures LOG RUN MODULE: one line per failed test in LOG, a go test output
# (not -v: a failing package's output comes whole, its shuffle seed first).
failures() {
	awk -v run="$2" -v mod="$3" '
	/^-test\.shuffle [0-9]+/ { seed = $2; next }
	/^[ \t]*--- FAIL: / {
		name = $3
		pending[++np] = name
		next
	}
	/^(FAIL|ok)[ \t]+[^ \t]+/ && NF >= 2 {
		pkg = $2
		if ($1 == "FAIL") {
			if (np == 0) pending[++np] = ($0 ~ /build failed|setup failed/) ? "(build)" : "(no test named: panic, timeout or TestMain)"
			for (i = 1; i <= np; i++) {
				name = pending[i]
				sub_ = 0
				for (j = 1; j <= np; j++) if (j != i && index(pending[j], name "/") == 1) sub_ = 1
				if (!sub_) printf "flakecheck: FAIL run %d module %s package %s test %s -test.shuffle %s\n", run, mod, pkg, name, (seed == "" ? "?" : seed)
			}
		}
		np = 0; seed = ""
		delete pending
	}' "$1"
}

total=0
for run in $(seq 1 "$runs"); do
	for m in "${modules[@]}"; do
		log="$logs/run$run-$(echo "${m#./}" | tr '/' '_' | sed 's/^$/root/; s/^\.$/root/').txt"
		start=${EPOCHREALTIME/,/.}
		(cd "$m" && go test -race -count=1 -shuffle=on "${runargs[@]}" ./...) >"$log" 2>&1
		rc=$?
		s=$(awk -v a="$start" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.1f", b - a }')
		found=$(failures "$log" "$run" "$m")
		if [ "$rc" -ne 0 ] && [ -z "$found" ]; then
			found="flakecheck: FAIL run $run module $m: go test exited $rc (see $log)"
		fi
		if [ -n "$found" ]; then
			echo "$found"
			total=$((total + $(printf '%s\n' "$found" | wc -l)))
		fi
		echo "flakecheck: run $run module $m: $([ "$rc" -eq 0 ] && echo ok || echo FAILED) ($s s)"
	done
done
echo "flakecheck: logs in $logs"
echo "flakecheck: $runs runs, $total failures"
[ "$total" -eq 0 ]
