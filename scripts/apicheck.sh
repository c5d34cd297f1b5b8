#!/usr/bin/env bash
# The API guard: apidiff (golang.org/x/exp/cmd/apidiff) on every package of
# every library module scripts/modules.txt tags (internal packages and
# commands aside), against the
# latest release, failing on an incompatible change the next version does not
# allow.
#
#   bash scripts/apicheck.sh              check the tree (CI runs this)
#   bash scripts/apicheck.sh --next V     check as if the next version were V
#                                         (scripts/release.sh V does this)
#   bash scripts/apicheck.sh --write      write the baseline, api/*.apidiff,
#                                         from the tree (scripts/release.sh
#                                         --baseline and every release do)
#
# Against what:
#   - after the first release: the latest release tag vX.Y.Z (pre-releases
#     aside), through the baseline the release committed in api/ at that tag
#     (or, for a module the tag has no baseline of, that tag's source);
#   - with no v* tag in the clone (before the first release, or a clone
#     without tags): the baseline committed in api/, whatever CHANGELOG.md
#     says was released; the message names the commit that last wrote it.
# What is allowed:
#   - compatible changes (additions) always; they are listed;
#   - an incompatible change against a release only when the next version,
#     the "Next version:" line of CHANGELOG.md's Unreleased section (or
#     --next), allows it: v0, a new minor version (v0.1.x to v0.2.0); v1 and
#     later, a new major version. A patch release is always a safe upgrade.
#   - without a release tag there is no version to bump: an incompatible
#     change is allowed by writing a new baseline (scripts/release.sh
#     --baseline) in the same commit, where a reviewer sees it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

APIDIFF_VERSION=v0.0.0-20261113113407-e3970619a1a4 # pinned: golang.org/x/exp of 2026-11-13

mode=check
next=
while [ $# -gt 0 ]; do
	case "$1" in
	--write) mode=write ;;
	--next) next=${2:?--next needs a version}; shift ;;
	*) echo "usage: bash scripts/apicheck.sh [--write | --next vX.Y.Z]" >&2; exit 2 ;;
	esac
	shift
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-apicheck.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/release" ./internal/release
GOBIN="$tmp/bin" GOWORK=off GOFLAGS= go install "golang.org/x/exp/cmd/apidiff@$APIDIFF_VERSION"
apidiff="$tmp/bin/apidiff"
# Commands (tagged modules whose root package is main) export nothing to
# guard; and a release tidies them only after the baseline is written, against
# the released modules (scripts/release.sh step 5), so they cannot be loaded
# alone before that.
mapfile -t commands < <("$tmp/release" commands)
mapfile -t mods < <("$tmp/release" modules | awk -v cmds=" ${commands[*]} " '$1 == "tag" && index(cmds, " " $2 " ") == 0 { print $2 " " $3 }')

# baseline DIR: the file in api/ that holds the module's API.
baseline() {
	if [ "$1" = . ]; then echo api/sluice.apidiff; else echo "api/${1//\//_}.apidiff"; fi
}

# export_api TREE DIR MODPATH OUT: write the API of the module in TREE/DIR.
# GOWORK=off: each module alone, resolving the others by its replace
# directives, as its own go.mod says. -trimpath: the export data records the
# position of each declaration, and without it the file names would be the
# checkout's absolute paths, so that the same API written from two
# checkouts would differ.
export_api() {
	(cd "$1/$2" && GOWORK=off GOFLAGS=-trimpath "$apidiff" -m -w "$4" "$3") 2> >(grep -v '^Ignoring internal package' >&2)
}

if [ "$mode" = write ]; then
	mkdir -p api
	for m in "${mods[@]}"; do
		read -r dir path <<<"$m"
		out=$(baseline "$dir")
		export_api "$root" "$dir" "$path" "$root/$out"
		echo "api: wrote $out ($path)"
	done
	exit 0
fi

latest=$(git tag -l 'v*' 2>/dev/null | "$tmp/release" latest)
if [ -n "$latest" ]; then
	[ -n "$next" ] || next=$("$tmp/release" next)
	"$tmp/release" checkversion "$next" "$latest" ||
		{ echo "apicheck: the next version must come after the latest release $latest (CHANGELOG.md)"; exit 1; }
	if why=$("$tmp/release" allowed "$latest" "$next"); then allowed=true; else allowed=false; fi
	echo "== apicheck: against the release $latest; next version $next: $why"
else
	# No v* tag here: before the first release, or a clone that did not
	# fetch the tags. Either way the committed baseline is the reference
	# (a release commits it in the commit it tags, so it is that release's
	# API until a --baseline rewrites it).
	allowed=false
	why="no v* release tag in this clone: an incompatible change needs a new baseline (scripts/release.sh --baseline) in the same commit"
	echo "== apicheck: against the baseline committed in api/, last written by $(git log -1 --format='%h "%s"' -- api/ 2>/dev/null | cut -c1-72) ($why)"
fi

status=0
for m in "${mods[@]}"; do
	read -r dir path <<<"$m"
	file=$(baseline "$dir")
	old="$tmp/old-${file#api/}"
	if [ -n "$latest" ]; then
		if ! git show "$latest:$file" >"$old" 2>/dev/null; then
			if ! git cat-file -e "$latest:$dir/go.mod" 2>/dev/null; then
				echo "== $path: new since $latest, nothing to compare"
				continue
			fi
			# A release from before the baseline existed: its source.
			if [ ! -d "$tmp/tag" ]; then
				mkdir "$tmp/tag" && git archive "$latest" | tar -x -C "$tmp/tag"
			fi
			export_api "$tmp/tag" "$dir" "$path" "$old"
		fi
	elif [ -f "$file" ]; then
		cp "$file" "$old"
	else
		echo "== $path: FAILED: no baseline $file (bash scripts/release.sh --baseline writes it)"
		status=1
		continue
	fi
	report=$(cd "$dir" && GOWORK=off GOFLAGS=-trimpath "$apidiff" -m "$old" "$path" 2>&1 | { grep -v '^Ignoring internal package' || true; }) || {
		echo "== $path: FAILED: apidiff: $report"
		status=1
		continue
	}
	if grep -q '^Incompatible changes:' <<<"$report"; then
		if $allowed; then
			echo "== $path: incompatible changes, allowed ($why)"
		else
			echo "== $path: FAILED: incompatible changes ($why)"
			status=1
		fi
	elif [ -n "$report" ]; then
		echo "== $path: compatible changes only"
	else
		echo "== $path: no API change"
	fi
	[ -z "$report" ] || sed 's/^/   /' <<<"$report"
done
if [ "$status" -ne 0 ]; then
	if [ -n "$latest" ]; then
		echo "apicheck FAILED: undo the change, or raise \"Next version:\" in CHANGELOG.md's Unreleased section to the version that allows it and say what changed there"
	else
		echo "apicheck FAILED: undo the change, or write the new baseline with bash scripts/release.sh --baseline and commit it with the change (say what changed in CHANGELOG.md)"
	fi
	exit 1
fi
echo "apicheck: ${#mods[@]} modules checked"
