#!/usr/bin/env bash
# The whole test suite: formatting, vet, staticcheck and the race-enabled tests
# of every Go module in the repository. Run from anywhere: bash scripts/test.sh
# Extra arguments go to `go test` (e.g. -run TestX, -count 1).
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2 # pinned: staticcheck 2026.2.2
mapfile -t modules < <(find . -name go.mod -not -path '*/testdata/*' -printf '%h\n' | sort)

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

status=0
for m in "${modules[@]}"; do
	echo "== module $m: go vet"
	(cd "$m" && go vet ./...) || status=1
	echo "== module $m: staticcheck $STATICCHECK_VERSION"
	(cd "$m" && go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...) || status=1
	echo "== module $m: go test -race"
	(cd "$m" && go test -race -count=1 "$@" ./...) || status=1
done
if [ "$status" -ne 0 ]; then
	echo "FAILED"; exit 1
fi
echo "all modules passed"
