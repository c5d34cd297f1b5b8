#!/usr/bin/env bash
# The whole test suite: formatting, vet, staticcheck, tidiness and the
# race-enabled tests of every Go module in the repository, its allocation
# tests without -race, a benchmark smoke that warns when a hot path falls
# behind its peer, the count of exported identifiers per released module
# (internal/apicount), then the API guard (scripts/apicheck.sh) and the consumer
# test (scripts/consumer.sh: every released module installed with go get
# outside the repository, and used).
# Run from anywhere: bash scripts/test.sh
# Extra arguments go to `go test` (e.g. -run TestX, -count 1).
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

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

status=0
for m in "${modules[@]}"; do
	echo "== module $m: go mod tidy -diff"
	(cd "$m" && go mod tidy -diff) || status=1
	echo "== module $m: go vet"
	(cd "$m" && go vet ./...) || status=1
	echo "== module $m: staticcheck $STATICCHECK_VERSION"
	(cd "$m" && go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...) || status=1
	echo "== module $m: go test -race"
	(cd "$m" && go test -race -count=1 "$@" ./...) || status=1
done
# -race skips the allocation tests (counts differ under the race detector):
# run them once more without it, so that every zero-allocation promise is
# checked on every run.
for m in "${modules[@]}"; do
	echo "== module $m: allocation tests (without -race)"
	(cd "$m" && go test -count=1 -run Alloc "$@" ./...) || status=1
done
echo "== benchmark smoke (ratios against bench/smoke.txt; warns, never fails)"
bash scripts/benchsmoke.sh
echo "== exported identifiers per released module (internal/apicount)"
go run ./internal/apicount || status=1
echo "== API guard"
bash scripts/apicheck.sh || status=1
echo "== consumer test"
bash scripts/consumer.sh || status=1
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
if [ "$status" -ne 0 ]; then
	echo "FAILED"; exit 1
fi
echo "all modules passed"
