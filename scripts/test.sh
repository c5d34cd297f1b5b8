#!/usr/bin/env bash
# The whole test suite: formatting, vet, staticcheck, tidiness and the
# race-enabled tests of every Go module in the repository, its allocation
# tests without -race, a benchmark smoke that warns when a hot path falls
# behind its peer, the count of exported identifiers per released module
# (internal/apicount), then the API guard (scripts/apicheck.sh) and the consumer
# test (scripts/consumer.sh: every released module installed with go get
# outside the repository, and used; it runs in the background from the
# start, see below). The modules run in two lanes at once.
# Run from anywhere: bash scripts/test.sh
# Extra arguments go to `go test` (e.g. -run TestX, -count 1).
# Each step prints its wall time when it ends ("== <step> (<seconds> s)"),
# and a table at the end gives each module's total and outcome.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2 # pinned: staticcheck 2026.2.2
mapfile -t modules < <(find . -name go.mod -not -path '*/testdata/*' -printf '%h\n' | sort)

# The tree as it was before the tests, to check at the end that building and
# testing changed nothing (go.work.sum, testdata, generated files).
tree_state() {
	git status --porcelain --untracked-files=all
	git diff HEAD --binary | sha256sum
}
in_git=false
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	in_git=true
	before=$(tree_state)
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-test.XXXXXX")
consumer_pid=
lane_pids=()
finish() {
	for p in "${lane_pids[@]}" $consumer_pid; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap finish EXIT

# Wall time: each step with a ROW appends "ROW<TAB>seconds<TAB>status" to
# $tmp/rows.tsv (steps run in background lanes too, so a file, not shell
# variables), and the summary at the end adds them up per module or step.
# step NAME ROW CMD...: runs CMD, prints "== NAME (<seconds> s)" after it,
# records it under ROW (nothing when ROW is empty) and returns CMD's exit
# status. STEP_LIVE, when set, is a file descriptor that also gets the two
# "== NAME" lines as they happen (a lane's full output is printed later).
step() {
	local name=$1 row=$2 start=${EPOCHREALTIME/,/.} rc=0 s
	shift 2
	echo "== $name"
	[ -z "${STEP_LIVE:-}" ] || echo "== $name" >&"$STEP_LIVE"
	"$@" || rc=$?
	s=$(awk -v a="$start" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.1f", b - a }')
	echo "== $name ($s s)"
	[ -z "${STEP_LIVE:-}" ] || echo "== $name ($s s)$([ "$rc" -eq 0 ] || echo ' FAILED')" >&"$STEP_LIVE"
	if [ -n "$row" ]; then
		printf '%s\t%s\t%s\n' "$row" "$s" "$rc" >>"$tmp/rows.tsv"
	fi
	return "$rc"
}
# inside DIR CMD...: runs CMD in DIR, in a subshell.
inside() { (cd "$1" && shift && "$@"); }
# summary: the wall time of each row, in the order rows first appear
# (modules in their sorted order), and the sum of them all.
summary() {
	echo "== wall time (rows of the module lanes overlap in time: the sum is more than the run's wall time)"
	printf '%-28s %9s  %s\n' "module or step" seconds outcome
	awk -F '\t' '
		!($1 in secs) { order[++n] = $1 }
		{ secs[$1] += $2; if ($3 != 0) bad[$1] = 1 }
		END {
			for (i = 1; i <= n; i++) {
				r = order[i]; total += secs[r]
				printf "%-28s %9.1f  %s\n", r, secs[r], (r in bad) ? "FAILED" : "ok"
			}
			printf "%-28s %9.1f\n", "total", total
		}' "$tmp/rows.tsv"
}
gofmt_check() {
	local unformatted
	unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go')) || return
	if [ -n "$unformatted" ]; then
		echo "gofmt would change:"; echo "$unformatted"; return 1
	fi
}

step gofmt gofmt gofmt_check || exit 1


# The consumer test builds every released module afresh outside the
# repository (minutes, much of it waiting on the module proxy and the
# linker): it runs in the background from the start, beside the modules'
# tests, and its output is printed in one piece at the end
# (SLUICE_TEST_SERIAL=1 runs it in its turn instead). It reads the tree and
# writes only under its own temporary directory.
consumer_start=
if [ -z "${SLUICE_TEST_SERIAL:-}" ]; then
	consumer_start=${EPOCHREALTIME/,/.}
	bash scripts/consumer.sh >"$tmp/consumer.log" 2>&1 &
	consumer_pid=$!
fi
consumer_result() {
	if [ -z "$consumer_start" ]; then
		bash scripts/consumer.sh
		return
	fi
	local rc=0
	wait "$consumer_pid" || rc=$?
	consumer_pid=
	cat "$tmp/consumer.log"
	awk -v a="$consumer_start" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "(in the background: %.1f s in all)\n", b - a }'
	return "$rc"
}

# staticcheck is built once, not by go run in every module.
staticcheck() { "$tmp/bin/staticcheck" "$@"; }
step "build staticcheck $STATICCHECK_VERSION" "" env GOBIN="$tmp/bin" GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" || exit 1

# Each module's checks, in order: tidiness, vet, staticcheck, the tests
# with -race, then the allocation tests again without it (-race skips them:
# counts differ under the race detector), so that every zero-allocation
# promise is checked on every run.
module_checks() {
	local m=$1 rc=0
	step "module $m: go mod tidy -diff" "$m" inside "$m" go mod tidy -diff || rc=1
	step "module $m: go vet" "$m" inside "$m" go vet ./... || rc=1
	step "module $m: staticcheck $STATICCHECK_VERSION" "$m" inside "$m" staticcheck ./... || rc=1
	# go vet above ran every analyzer on every package, tests included; the
	# subset go test runs by default would only repeat part of it.
	step "module $m: go test -race" "$m" inside "$m" go test -race -vet=off -count=1 "${test_args[@]}" ./... || rc=1
	step "module $m: allocation tests (without -race)" "$m" inside "$m" go test -vet=off -count=1 -run Alloc "${test_args[@]}" ./... || rc=1
	return "$rc"
}
test_args=("$@")

# The modules run in two lanes at once (one test binary alone leaves much
# of the second core idle: linking, redis-server, single-goroutine tests).
# The lanes are balanced by their usual times: the nested modules with the
# heaviest dependencies in one, the rest in the other. Each module's output
# goes to a log printed whole, in module order, when both lanes are done;
# the "== step (seconds)" lines are printed live. SLUICE_TEST_SERIAL=1 runs
# the modules one after another instead.
lane2_modules=" ./examples ./redis ./envoyrls ./envoyrls/cmd/sluice-rls "
status=0
exec {live}>&1
run_lane() {
	local lane=$1 m rc=0
	for m in "${modules[@]}"; do
		case "$lane2_modules" in
		*" $m "*) [ "$lane" = 2 ] || continue ;;
		*) [ "$lane" = 1 ] || continue ;;
		esac
		STEP_LIVE=$live module_checks "$m" >"$tmp/module-${m//\//_}.log" 2>&1 || rc=1
	done
	return "$rc"
}
if [ -n "${SLUICE_TEST_SERIAL:-}" ]; then
	for m in "${modules[@]}"; do module_checks "$m" || status=1; done
else
	echo "== modules in two lanes (each module's output follows when both are done)"
	run_lane 1 &
	lane_pids+=($!)
	run_lane 2 &
	lane_pids+=($!)
	for p in "${lane_pids[@]}"; do wait "$p" || status=1; done
	lane_pids=()
	for m in "${modules[@]}"; do cat "$tmp/module-${m//\//_}.log"; done
fi
step "benchmark smoke (ratios against bench/smoke.txt; warns, never fails)" "benchmark smoke" bash scripts/benchsmoke.sh || exit
step "exported identifiers per released module (internal/apicount)" "apicount" go run ./internal/apicount || status=1
step "API guard" "API guard" bash scripts/apicheck.sh || status=1
step "consumer test" "consumer test" consumer_result || status=1
if $in_git; then
	echo "== the tests left the tree as they found it"
	if [ "$(tree_state)" != "$before" ]; then
		echo "building or testing changed the tree:"
		git status --porcelain --untracked-files=all
		echo "(go.work.sum: run bash scripts/worksum.sh and commit the result)"
		status=1
	fi
else
	echo "== not a git checkout: tree check skipped"
fi
summary
if [ "$status" -ne 0 ]; then
	echo "FAILED"; exit 1
fi
echo "all modules passed"
