#!/usr/bin/env bash
# Regenerates go.work.sum so that building, testing, vetting and `go doc`
# leave it unchanged. Run after changing any go.mod or go.work, then commit
# the result: bash scripts/worksum.sh
#
# Why it drifts otherwise: in workspace mode every go command that loads
# packages may rewrite go.work.sum. It adds the checksums it had to verify
# that no module's go.sum holds (different commands load different parts of
# the module graph, so each adds its own), and whenever it rewrites the file
# it drops the lines a module's go.sum now holds. The fixed point is the
# complete set: the sums of every module in the workspace build list
# (`go mod download` records them all) and of every package graph the
# commands load, minus what the modules' go.sum files already hold.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t modules < <(go list -m -f '{{.Dir}}' | sort)

: >go.work.sum
go mod download
for m in "${modules[@]}"; do
	# The package graphs `go build`, `go vet` and `go test` load.
	(cd "$m" && go list -deps -test ./... >/dev/null)
done
echo "go.work.sum: $(wc -l <go.work.sum) lines"
