#!/usr/bin/env bash
# Release every module scripts/modules.txt tags, together, at one version.
#
#   bash scripts/release.sh vX.Y.Z                 dry run (the default)
#   bash scripts/release.sh --apply vX.Y.Z         release here
#   bash scripts/release.sh [--apply] --test vX.Y.Z
#                                                  also run scripts/test.sh (the
#                                                  whole suite, consumer test
#                                                  included) before tagging
#   bash scripts/release.sh --baseline             only rewrite the API baseline
#                                                  api/ from the tree (an
#                                                  incompatible change made on
#                                                  purpose before the first
#                                                  release, e.g. a rename);
#                                                  commit it with the change
#
# A release vX.Y.Z:
#  1. checks: vX.Y.Z is a canonical version after the latest release, it is the
#     "Next version:" of CHANGELOG.md's Unreleased section (or a pre-release of
#     it, vX.Y.Z-rc.N), none of its tags exists, the tree is clean;
#  2. sets every requirement of a module of this repository on another one to
#     vX.Y.Z in every go.mod (internal/release setreq; a command's replaces of
#     this repository's modules go, as go install PKG@vX.Y.Z refuses them),
#     tidies every module but the commands and regenerates go.work.sum
#     (scripts/worksum.sh);
#  3. for a release (not a pre-release): turns the Unreleased section of
#     CHANGELOG.md into vX.Y.Z's, dated today (UTC), and opens a new one whose
#     next version is vX.Y.(Z+1);
#  4. runs the API guard with vX.Y.Z as the next version (scripts/apicheck.sh),
#     then writes the baseline api/ for vX.Y.Z;
#  5. tidies each command against a file:// module proxy of the other modules
#     at vX.Y.Z made from the release's tree (internal/release proxy: the
#     files the tags will hold, so its go.sum holds the sums the public proxy
#     will serve), then checks that every module builds alone (GOWORK=off)
#     and is tidy, and with --test runs the whole suite;
#  6. commits "release vX.Y.Z" and tags it once per released module, annotated:
#     vX.Y.Z for the root, DIR/vX.Y.Z for the others (grpclimit/vX.Y.Z,
#     redis/vX.Y.Z, ...). Untagged modules (bench, examples,
#     internal/*) get no tag: see scripts/modules.txt;
#  7. commits "after vX.Y.Z: ..." putting each command's replaces back, so that
#     the branch builds and tidies against its own tree again (the tags keep
#     the release commit).
# It never pushes: it prints the git push that publishes the release.
#
# The dry run does all of it, commit and tags included, in a temporary clone
# of HEAD, prints the diff, the commit and the tags, and deletes the clone: it
# changes nothing in this repository (uncommitted changes are not in it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

usage() {
	sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

apply=false
test=false
baseline_only=false
version=
while [ $# -gt 0 ]; do
	case "$1" in
	--apply) apply=true ;;
	--test) test=true ;;
	--baseline) baseline_only=true ;;
	--dry-run) apply=false ;;
	-h | --help) usage ;;
	-*) echo "release: unknown flag $1" >&2; usage ;;
	*) [ -z "$version" ] || usage; version=$1 ;;
	esac
	shift
done

if $baseline_only; then
	[ -z "$version" ] || usage
	exec bash scripts/apicheck.sh --write
fi
[ -n "$version" ] || usage

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-release.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "release FAILED: $*" >&2
	exit 1
}
step() { echo "== release $version: $*"; }

go build -o "$tmp/release" ./internal/release
rel="$tmp/release"

# 1. Checks on the repository as it is.
latest=$(git tag -l 'v*' | "$rel" latest)
"$rel" checkversion "$version" "$latest" || fail "bad version"
next=$("$rel" next)
base=${version%%-*}
if [ "$version" != "$next" ] && [ "$base" != "$next" ]; then
	fail "CHANGELOG.md's Unreleased section says Next version: $next; release that (or a pre-release of it), or change that line first"
fi
prerelease=false
[ "$version" = "$base" ] || prerelease=true
mapfile -t tagged < <("$rel" modules | awk '$1 == "tag" { print $2 }')
tags=()
for dir in "${tagged[@]}"; do
	if [ "$dir" = . ]; then t=$version; else t=$dir/$version; fi
	if git rev-parse -q --verify "refs/tags/$t" >/dev/null; then fail "the tag $t exists already"; fi
	tags+=("$t")
done
if [ -n "$(git status --porcelain)" ]; then
	if $apply; then fail "the tree has uncommitted changes; commit or stash them first"; fi
	echo "release: note: the tree has uncommitted changes; the dry run uses HEAD without them, --apply would refuse"
fi
branch=$(git symbolic-ref -q --short HEAD || true)
if $apply && [ -z "$branch" ]; then fail "HEAD is detached: check out the branch to release from"; fi
echo "release: $version of ${#tags[@]} modules from $(git rev-parse --short HEAD)${branch:+ on $branch}; latest release: ${latest:-none}"

if $apply; then
	work=$root
else
	step "dry run in a temporary clone"
	work="$tmp/clone"
	git clone -q --shared --no-checkout "$root" "$work"
	git -C "$work" checkout -q --detach "$(git rev-parse HEAD)"
fi
cd "$work"
mapfile -t moddirs < <("$rel" modules | awk '{ print $2 }')
mapfile -t commands < <("$rel" commands)
# Each command's go.mod as it is, for step 7.
mkdir "$tmp/orig"
for dir in "${commands[@]}"; do
	cp "$dir/go.mod" "$tmp/orig/${dir//\//_}.go.mod"
done
is_command() {
	local c
	for c in "${commands[@]}"; do [ "$c" = "$1" ] && return 0; done
	return 1
}
# The environment a command is tidied and built alone in: the released
# modules from a proxy of the release's tree (step 5), everything else from
# the module cache or the usual proxy; a module cache of its own, so that no
# candidate zip stays in the shared one.
modcache=$(go env GOMODCACHE)
usual=$(go env GOPROXY)
as_released() {
	env GOWORK=off GOTOOLCHAIN=local GOFLAGS=-modcacherw GOMODCACHE="$tmp/modcache" \
		GOPROXY="file://$tmp/proxy,file://$modcache/cache/download,$usual" \
		GONOSUMDB=github.com/sluicehq/sluice "$@"
}

# 2. Requirements, tidiness, go.work.sum.
step "requirements on this repository's modules set to $version"
"$rel" setreq "$version"
step "go mod tidy in every module but the commands (${commands[*]:-none})"
for dir in "${moddirs[@]}"; do
	is_command "$dir" && continue
	(cd "$dir" && go mod tidy) || fail "go mod tidy in $dir"
done
step "go.work.sum"
bash scripts/worksum.sh

# 3. The changelog.
if ! $prerelease; then
	step "CHANGELOG.md: Unreleased becomes [${version#v}] - $(date -u +%F)"
	"$rel" changelog "$version" "$(date -u +%F)"
fi

# 4. The API guard, then the baseline of this release.
step "API guard with $version as the next version"
bash scripts/apicheck.sh --next "$version" || fail "the API guard"
step "API baseline api/ for $version"
bash scripts/apicheck.sh --write

# 5. The commands against the release's modules, then every module alone.
if [ "${#commands[@]}" -gt 0 ]; then
	step "module proxy of $version from the release's tree, for the commands"
	"$rel" proxy -version "$version" -out "$tmp/proxy" >/dev/null || fail "the module proxy"
	cp go.work.sum "$tmp/go.work.sum"
	for dir in "${commands[@]}"; do
		step "go mod tidy in $dir against that proxy"
		(cd "$dir" && as_released go mod tidy) || fail "go mod tidy in $dir"
	done
	bash scripts/worksum.sh
	# The proxy's zip of the root module holds go.work.sum: the tag must hold
	# the same file.
	cmp -s go.work.sum "$tmp/go.work.sum" ||
		fail "go.work.sum changed when the commands were tidied, after the proxy was made from it"
fi
for dir in "${moddirs[@]}"; do
	step "module $dir: go build (GOWORK=off), go mod tidy -diff"
	if is_command "$dir"; then
		(cd "$dir" && as_released go build -o /dev/null ./... && as_released go mod tidy -diff) || fail "module $dir"
	else
		(cd "$dir" && GOWORK=off go build -o /dev/null ./... && go mod tidy -diff) || fail "module $dir"
	fi
done
if $test; then
	step "the whole suite"
	bash scripts/test.sh || fail "scripts/test.sh"
fi

# 6. Commit and tags.
step "the changes"
git status --short
git --no-pager diff --stat
git --no-pager diff -- '*go.mod' CHANGELOG.md | sed 's/^/  /'
if [ -n "$(git status --porcelain)" ]; then
	git add -A
	git commit -q -m "release $version

Every module's requirements on this repository's modules set to $version,
every module tidied, the API baseline api/ written for $version.
Tags: ${tags[*]}"
fi
for t in "${tags[@]}"; do
	git tag -a "$t" -m "sluice $version"
done
step "commit and tags"
git --no-pager log --oneline -1
for t in "${tags[@]}"; do
	echo "  tag $t -> $(git rev-parse --short "$t^{commit}")"
done

# 7. Back to development.
if [ "${#commands[@]}" -gt 0 ]; then
	step "the commands' replaces back, after the tags"
	for dir in "${commands[@]}"; do
		"$rel" devreplace "$dir" "$tmp/orig/${dir//\//_}.go.mod" || fail "devreplace $dir"
		(cd "$dir" && GOWORK=off go mod tidy && GOWORK=off go build -o /dev/null ./...) || fail "module $dir after the release"
	done
	bash scripts/worksum.sh
	git --no-pager diff --stat
	git add -A
	git commit -q -m "after $version: the commands build against the tree again

The release commit dropped each command's replaces of this repository's
modules (go install PKG@$version refuses them) and the tags keep it that
way; on the branch they come back, so that go mod tidy and GOWORK=off
builds find the tree rather than the module proxy."
	git --no-pager log --oneline -1
fi
if $apply; then
	echo "release $version done here. Publish it with:"
	echo "  git push origin ${branch} ${tags[*]}"
else
	echo "dry run of $version passed; nothing changed in $root. Release with: bash scripts/release.sh --apply $version"
fi
