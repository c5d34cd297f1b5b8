#!/usr/bin/env bash
# The whole test suite: formatting, vet, staticcheck, tidiness and the
# race-enabled tests of every Go module in the repository, its allocation
# tests without -race, a benchmark smoke that warns when a hot path falls
# behind its peer, the count of exported identifiers per released module
# (internal/apicount), then the API guard (scripts/apicheck.sh) and the consumer
# test (scripts/consumer.sh: every released module installed with go get
# outside the repository, and used; it runs in the background from the
# start, see below).
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

# Wall time: seconds per module (or per whole-repository step) and which
# of them failed, for the summary at the end.
declare -A secs failed
rows=()
# step NAME ROW CMD...: runs CMD, prints "== NAME (<seconds> s)" after it,
# adds the seconds to ROW's total (none when ROW is empty) and returns
# CMD's exit status.
step() {
	local name=$1 row=$2 start=${EPOCHREALTIME/,/.} rc=0 s
	shift 2
	echo "== $name"
	"$@" || rc=$?
	s=$(awk -v a="$start" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.1f", b - a }')
	echo "== $name ($s s)"
	if [ -n "$row" ]; then
		[ -n "${secs[$row]+set}" ] || rows+=("$row")
		secs[$row]=$(awk -v a="${secs[$row]:-0}" -v b="$s" 'BEGIN { printf "%.1f", a + b }')
		[ "$rc" -eq 0 ] || failed[$row]=1
	fi
	return "$rc"
}
# inside DIR CMD...: runs CMD in DIR, in a subshell.
inside() { (cd "$1" && shift && "$@"); }
summary() {
	local r total=0
	echo "== wall time"
	printf '%-28s %9s  %s\n' "module or step" seconds outcome
	for r in "${rows[@]}"; do
		printf '%-28s %9s  %s\n' "$r" "${secs[$r]}" "$([ -n "${failed[$r]:-}" ] && echo FAILED || echo ok)"
		total=$(awk -v a="$total" -v b="${secs[$r]}" 'BEGIN { printf "%.1f", a + b }')
	done
	printf '%-28s %9s\n' total "$total"
}
gofmt_check() {
	local unformatted
	unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go')) || return
	if [ -n "$unformatted" ]; then
		echo "gofmt would change:"; echo "$unformatted"; return 1
	fi
}

step gofmt gofmt gofmt_check || exit 1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-test.XXXXXX")
consumer_pid=
finish() {
	if [ -n "$consumer_pid" ]; then kill "$consumer_pid" 2>/dev/null; wait "$consumer_pid" 2>/dev/null; fi
	rm -rf "$tmp"
}
trap finish EXIT

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

status=0
for m in "${modules[@]}"; do
	step "module $m: go mod tidy -diff" "$m" inside "$m" go mod tidy -diff || status=1
	step "module $m: go vet" "$m" inside "$m" go vet ./... || status=1
	step "module $m: staticcheck $STATICCHECK_VERSION" "$m" inside "$m" staticcheck ./... || status=1
	# go vet above ran every analyzer on every package, tests included; the
	# subset go test runs by default would only repeat part of it.
	step "module $m: go test -race" "$m" inside "$m" go test -race -vet=off -count=1 "$@" ./... || status=1
done
# -race skips the allocation tests (counts differ under the race detector):
# run them once more without it, so that every zero-allocation promise is
# checked on every run.
for m in "${modules[@]}"; do
	step "module $m: allocation tests (without -race)" "$m" inside "$m" go test -vet=off -count=1 -run Alloc "$@" ./... || status=1
done
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
