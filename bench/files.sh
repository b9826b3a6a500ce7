#!/usr/bin/env bash
# bench/files.sh — time files.grep and files.search (in-process, through the provider)
# against ripgrep and GNU grep on a copy of $(go env GOROOT)/src, in the same run, and
# print the ratios.
#
# Targets (issue "files plane"): literal <= 1.5x rg and no slower than grep -r;
# case-insensitive literal <= 2x rg; regex <= 4x rg; search <= 1 s.
#
# Usage: bench/files.sh [ROUNDS]   (default 7; each figure is the median of ROUNDS runs,
# the three tools interleaved round by round so that machine noise hits them alike)
#
# Fairness: rg runs with -uu (hidden files searched, ignore files not honoured, binary
# files skipped — what files.grep does) and -n (line numbers, which files.grep returns);
# output goes through a pipe (GNU grep stops at the first match when writing to
# /dev/null). rg and grep timings include process start-up (a few ms); files.grep is
# timed in-process (go test -bench): the provider is what is measured; the CLI adds its
# start-up (~13 ms, see bench/cli.sh).
set -euo pipefail

ROUNDS="${1:-7}"
cd "$(dirname "$0")/.."

if ! command -v rg >/dev/null 2>&1; then
	echo "ripgrep not found; installing it (apt-get)…" >&2
	if [ "$(id -u)" = 0 ]; then
		apt-get update -qq && apt-get install -y -qq ripgrep >/dev/null
	else
		sudo apt-get update -qq && sudo apt-get install -y -qq ripgrep >/dev/null
	fi
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
SRC="$(go env GOROOT)/src"
cp -r "$SRC" "$TMP/src"
TREE="$TMP/src"
echo "tree: copy of $SRC ($(find "$TREE" -type f | wc -l) files, $(du -sh "$TREE" | cut -f1)), $(nproc) CPUs"
echo "rg:   $(rg --version 2>/dev/null | sed -n 1p)"
echo "grep: $(grep --version | sed -n 1p)"

go test -c -o "$TMP/fsplane.test" ./pkg/fsplane >/dev/null

# Warm the page cache.
rg -uu -c zzzzqqqq "$TREE" >/dev/null 2>&1 || true

now_ns() { date +%s%N; }

# time_cmd CMD… : run in $TREE, print elapsed milliseconds (float).
time_cmd() {
	local t0 t1
	t0=$(now_ns)
	(cd "$TREE" && "$@" | wc -l >/dev/null) 2>/dev/null || true
	t1=$(now_ns)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'
}

# time_ours BENCH : median-free single figure (ms/op) from one go test -bench run.
time_ours() {
	FSPLANE_BENCH_ROOT="$TREE" "$TMP/fsplane.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime 3x 2>/dev/null |
		awk '/ns\/op/ { for (i = 1; i <= NF; i++) if ($(i+1) == "ns/op") printf "%.1f", $i / 1e6 }'
}

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2] + a[NR/2+1]) / 2 }'; }

declare -A RG GREP OURS
NAMES=(literal literal-ci regex)
declare -A RGARGS GREPARGS
RGARGS[literal]="-n -uu -F ErrUnexpectedEOF ."
GREPARGS[literal]="-rn -F ErrUnexpectedEOF ."
RGARGS[literal-ci]="-n -uu -i -F unexpectedeof ."
GREPARGS[literal-ci]="-rn -i -F unexpectedeof ."
REGEX='func \(\w+ \*\w+\) Read[A-Z]\w*\('

for n in "${NAMES[@]}"; do RG[$n]=""; GREP[$n]=""; OURS[$n]=""; done
for ((r = 1; r <= ROUNDS; r++)); do
	for n in "${NAMES[@]}"; do
		if [ "$n" = regex ]; then
			RG[$n]+=" $(time_cmd rg -n -uu "$REGEX" .)"
			GREP[$n]+=" $(time_cmd grep -rn -E "$REGEX" .)"
		else
			# shellcheck disable=SC2086
			RG[$n]+=" $(time_cmd rg ${RGARGS[$n]})"
			# shellcheck disable=SC2086
			GREP[$n]+=" $(time_cmd grep ${GREPARGS[$n]})"
		fi
		OURS[$n]+=" $(time_ours "BenchmarkGrep/$n")"
	done
done

# Same answers? (line counts)
count_ours() {
	FSPLANE_BENCH_ROOT="$TREE" FSPLANE_BENCH_COUNT=1 "$TMP/fsplane.test" -test.run '^TestBenchCount$' -test.v 2>/dev/null |
		awk -v n="$1" '$1 == "count" && $2 == n { print $3 }'
}

printf '\n%-11s %9s %9s %9s %9s %9s   %s\n' case files.grep rg "grep -r" "vs rg" "vs grep" "target"
for n in "${NAMES[@]}"; do
	o=$(echo "${OURS[$n]}" | median)
	g=$(echo "${RG[$n]}" | median)
	gr=$(echo "${GREP[$n]}" | median)
	case $n in
	literal) target="<= 1.5x rg, <= 1.0x grep" ;;
	literal-ci) target="<= 2x rg" ;;
	regex) target="<= 4x rg" ;;
	esac
	awk -v n="$n" -v o="$o" -v g="$g" -v gr="$gr" -v t="$target" \
		'BEGIN { printf "%-11s %7.1fms %7.1fms %7.1fms %8.2fx %8.2fx   %s\n", n, o, g, gr, o / g, o / gr, t }'
done

S=""
for ((r = 1; r <= 3; r++)); do S+=" $(time_ours "BenchmarkSearch/two-terms")"; done
s=$(echo "$S" | median)
awk -v s="$s" 'BEGIN { printf "\nsearch      %7.1fms (target <= 1000ms)\n", s }'

echo
echo "match counts (files.grep is capped at 1,000; these patterns stay below it):"
for n in "${NAMES[@]}"; do
	if [ "$n" = regex ]; then
		c_rg=$(cd "$TREE" && rg -n -uu "$REGEX" . | wc -l)
	else
		# shellcheck disable=SC2086
		c_rg=$(cd "$TREE" && rg ${RGARGS[$n]} | wc -l)
	fi
	echo "  $n: files.grep $(count_ours "$n")  rg $c_rg"
done

# Issue 28's rows: files.grep ÷ rg in CPU time (user + system) for each mode, interleaved
# round by round in one run (bench/interleave.py): files.grep is 5 calls in one test-binary
# process (its start is in the figure), rg is 5 processes. Target <= 1.0x on every mode.
echo
echo "issue 28 rows: files.grep ÷ rg (CPU; target <= 1.0x on every mode)"
# loop5 NAME CMD…: a script running CMD five times in the tree (quoting kept)
loop5() {
	local f="$TMP/$1.sh"
	shift
	{
		printf 'cd %q\nfor i in 1 2 3 4 5; do ' "$TREE"
		printf '%q ' "$@"
		printf '>/dev/null; done\n'
	} > "$f"
	echo "bash $f"
}
ours5() { echo "$TMP/fsplane.test -test.run ^\$ -test.bench ^BenchmarkGrep/$1\$ -test.benchtime 5x"; }
# shellcheck disable=SC2086
FSPLANE_BENCH_ROOT="$TREE" python3 bench/interleave.py --runs "$ROUNDS" --warmup 1 \
	--peer "rg literal x5" "$(loop5 rg-literal rg ${RGARGS[literal]})" --cmd "files.grep literal x5" "$(ours5 literal)"
# shellcheck disable=SC2086
FSPLANE_BENCH_ROOT="$TREE" python3 bench/interleave.py --runs "$ROUNDS" --warmup 1 \
	--peer "rg -i x5" "$(loop5 rg-ci rg ${RGARGS[literal-ci]})" --cmd "files.grep -i x5" "$(ours5 literal-ci)"
FSPLANE_BENCH_ROOT="$TREE" python3 bench/interleave.py --runs "$ROUNDS" --warmup 1 \
	--peer "rg regex x5" "$(loop5 rg-regex rg -n -uu "$REGEX" .)" --cmd "files.grep regex x5" "$(ours5 regex)"
