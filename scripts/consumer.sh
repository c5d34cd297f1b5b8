#!/usr/bin/env bash
# The consumer test: can a user outside this repository install every
# released module with go get, and use it?
#
#   bash scripts/consumer.sh [VERSION]
#
# VERSION defaults to a pre-release of the next version CHANGELOG.md names,
# unique to the run (v0.1.0-rc.ci.<unix time>.<pid>): a version the module
# cache already holds would hide this tree's files behind an earlier run's.
#
# 1. internal/release writes a file:// module proxy holding every module that
#    scripts/modules.txt tags, at VERSION, made from the working tree (tracked
#    files and untracked ones git does not ignore) with each go.mod requiring
#    VERSION of the others, as scripts/release.sh would set them.
# 2. In a fresh module in a temporary directory, with GOWORK=off and
#    GOPROXY=file://<that proxy>,<go env GOPROXY> (the usual proxy serves the
#    third-party modules), it runs go get on the root module and on every
#    nested released module at VERSION.
# 3. It checks go list -m: every one at VERSION, none replaced, each holding
#    the repository's LICENSE (a nested module's zip carries the root's); then vets,
#    builds and runs internal/release/testdata/consumer, which uses each
#    module over loopback (HTTP, gRPC, MCP, Envoy's service, and Redis with a
#    redis-server it starts itself) and fails when anything is off.
#
# It changes nothing in the repository, and removes VERSION of sluice's
# modules from the module cache when it ends (the cache is shared with every
# other build, so that grpc and the rest are not compiled again).
# Needs redis-server on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-consumer.XXXXXX")
modcache=$(go env GOMODCACHE)
released=()
version=
cleanup() {
	# VERSION of each released module, extracted and downloaded; nothing else.
	if [ -n "$version" ]; then
		for m in "${released[@]}"; do
			if [ -d "$modcache/$m@$version" ]; then
				chmod -R u+w "$modcache/$m@$version" && rm -rf "$modcache/$m@$version"
			fi
			dl="$modcache/cache/download/$m/@v"
			rm -f "$dl/$version".*
			if [ -f "$dl/list" ]; then
				grep -vxF "$version" "$dl/list" >"$dl/list.new" || true
				if [ -s "$dl/list.new" ]; then mv "$dl/list.new" "$dl/list"; else rm -f "$dl/list.new" "$dl/list"; fi
			fi
		done
		for d in "$modcache/github.com/sluicehq" "$modcache/cache/download/github.com/sluicehq"; do
			if [ -d "$d" ]; then find "$d" -depth -type d -empty -delete; fi
		done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "consumer test FAILED: $*" >&2
	exit 1
}

go build -o "$tmp/release" ./internal/release
mapfile -t released < <("$tmp/release" modules | awk '$1 == "tag" { print $3 }')
# Commands (a tagged module whose root package is main) are installed with
# go install PKG@VERSION, as their users do, not required by the program.
libraries=()
commands=()
while read -r kind dir m; do
	[ "$kind" = tag ] || continue
	if grep -qx 'package main' $(ls "$dir"/*.go | grep -v '_test\.go$') 2>/dev/null; then
		commands+=("$m")
	else
		libraries+=("$m")
	fi
done < <("$tmp/release" modules)
[ "${#released[@]}" -gt 0 ] || fail "scripts/modules.txt tags no module"
# Module paths are lower case here: the cache's escaped paths are the paths.
for m in "${released[@]}"; do
	[ "$m" = "$(printf '%s' "$m" | tr 'A-Z' 'a-z')" ] || fail "$m: upper case in a module path"
done
want=${1:-$("$tmp/release" next)-rc.ci.$(date +%s).$$}
"$tmp/release" checkversion "$want"
for m in "${released[@]}"; do
	if [ -e "$modcache/cache/download/$m/@v/$want.mod" ]; then
		fail "$m@$want is in the module cache already: it would be used instead of this tree (pick another version)"
	fi
done
version=$want # from here on, cleanup removes it from the cache

echo "== consumer: module proxy at $version from the working tree"
"$tmp/release" proxy -version "$version" -out "$tmp/proxy"

usual=$(go env GOPROXY)
export GOWORK=off
export GOFLAGS=-mod=mod
export GOPROXY="file://$tmp/proxy,$usual"
# The candidate is in no checksum database; every other module is checked
# against it as a user's would be.
export GONOSUMDB=github.com/sluicehq/sluice
export GOTOOLCHAIN=local

mkdir "$tmp/consumer"
cp internal/release/testdata/consumer/main.go "$tmp/consumer/"
cd "$tmp/consumer"
go mod init sluice-consumer >/dev/null 2>&1 || fail "go mod init"
go mod edit -go=1.26.0

for m in "${libraries[@]}"; do
	echo "== consumer: go get $m@$version"
	go get "$m@$version" || fail "go get $m@$version"
done
echo "== consumer: go mod tidy (the program's other imports)"
go mod tidy || fail "go mod tidy"

echo "== consumer: the build list"
for m in "${libraries[@]}"; do
	got=$(go list -m -f '{{.Version}}{{with .Replace}} replaced by {{.Path}} {{.Version}}{{end}}' "$m") ||
		fail "go list -m $m"
	echo "$m $got"
	[ "$got" = "$version" ] || fail "$m is at \"$got\", want $version"
done
echo "== consumer: every module zip holds the license"
for m in "${libraries[@]}"; do
	dir=$(go list -m -f '{{.Dir}}' "$m") || fail "go list -m -f {{.Dir}} $m"
	[ -f "$dir/LICENSE" ] || fail "$m@$version: the module zip has no LICENSE"
	cmp -s "$dir/LICENSE" "$root/LICENSE" || fail "$m@$version: its LICENSE is not the repository's"
done
if go list -m all | grep -q 'sluicehq/sluice.* v0\.0\.0'; then
	fail "a v0.0.0 of a sluice module is in the build list"
fi

for m in "${commands[@]}"; do
	echo "== consumer: go install $m@$version"
	GOBIN="$tmp/bin" go install "$m@$version" || fail "go install $m@$version"
	[ -f "$modcache/$m@$version/LICENSE" ] || fail "$m@$version: the module zip has no LICENSE"
	name=${m##*/}
	# A configuration directory that does not exist: one line naming it, exit 1.
	out=$(env -i PATH="$PATH" BACKEND_TYPE=memory USE_STATSD=false RUNTIME_ROOT="$tmp/none" "$tmp/bin/$name" 2>&1) &&
		fail "$name started without a configuration"
	case "$out" in
	"$name: configuration $tmp/none/config: "*) ;;
	*) fail "$name without a configuration said: $out" ;;
	esac
done
echo "== consumer: go vet, go build, run"
go vet . || fail "go vet"
go build -o consumer . || fail "go build"
./consumer -version "$version" || fail "the consumer program"
cd "$root"
echo "consumer test passed: ${#released[@]} modules at $version: ${#libraries[@]} installed with go get and used, ${#commands[@]} with go install and run"
