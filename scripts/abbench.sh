#!/usr/bin/env bash
# A/B benchmark of two commits on this noisy 2-core machine: builds the test
# binary of one package at each commit, then runs them alternately, swapping
# which goes first each round, and prints the median of the per-round ratio
# new ÷ old for every benchmark and metric (ns/op and the custom */op ones).
#
#   bash scripts/abbench.sh OLD NEW PKG BENCH [ROUNDS] [BENCHTIME]
#   bash scripts/abbench.sh 95e846a WORKTREE ./bucket 'AllowN$|Parallel$' 7 200ms
#
# NEW may be WORKTREE: the working tree as it is, uncommitted changes included.
# PKG is a package path relative to the repository root (./bucket, ./stack);
# for a nested module give the module directory and the package inside it
# (redis:. or bench:.).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
old=$1 new=$2 pkg=$3 bench=$4 rounds=${5:-7} benchtime=${6:-200ms}
mod=. p=$pkg
if [[ $pkg == *:* ]]; then mod=${pkg%%:*} p=${pkg#*:}; fi
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; git -C "$root" worktree remove --force "$tmp/new" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

build() { # commit dir out
	local src=$root
	if [ "$1" != WORKTREE ]; then
		git -C "$root" worktree add --detach -q "$tmp/$2" "$1"
		src=$tmp/$2
	fi
	(cd "$src/$mod" && go test -c -o "$3" "$p")
}
build "$old" old "$tmp/old.test"
build "$new" new "$tmp/new.test"

run() { # binary side round
	(cd "$root/$mod/$p" && "$1" -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime" -test.benchmem) |
		awk -v side="$2" -v round="$3" '/^Benchmark/ { name=$1; for (i = 3; i < NF; i++) if ($(i+1) ~ /\//) print round, side, name, $(i+1), $i }'
}
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then run "$tmp/old.test" old "$r"; run "$tmp/new.test" new "$r"
	else run "$tmp/new.test" new "$r"; run "$tmp/old.test" old "$r"; fi
done >"$tmp/results"

echo "new ÷ old, median of $rounds rounds (old=$old new=$new, $pkg -bench '$bench', benchtime $benchtime)"
awk '
{ v[$1, $2, $3, $4] = $5; if (!(($3, $4) in seen)) { seen[$3, $4] = 1; keys[++nk] = $3 SUBSEP $4 }; if ($1 > nr) nr = $1 }
END {
	for (k = 1; k <= nk; k++) {
		split(keys[k], kk, SUBSEP); n = 0; so = ""; sn = ""
		for (r = 1; r <= nr; r++) {
			o = v[r, "old", kk[1], kk[2]]; w = v[r, "new", kk[1], kk[2]]
			if (o > 0 && w != "") { ratio[++n] = w / o; so = so " " o; sn = sn " " w }
		}
		if (n == 0) continue
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (ratio[j] < ratio[i]) { t = ratio[i]; ratio[i] = ratio[j]; ratio[j] = t }
		med = (n % 2) ? ratio[(n + 1) / 2] : (ratio[n / 2] + ratio[n / 2 + 1]) / 2
		printf "%-60s %-22s %6.3f  (%.3f–%.3f)\n", kk[1], kk[2], med, ratio[1], ratio[n]
	}
}' "$tmp/results"
