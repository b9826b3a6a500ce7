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
#        ISSUE28_ONLY=1 bench/files.sh [ROUNDS]   (only issue 28's rows, at the end)
#        BASE=/path/to/old/sharedos bench/files.sh   (issue 28's whole-process rows also
#        for that build, interleaved in the same run: before/after)
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

if [ -z "${ISSUE28_ONLY:-}" ]; then
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
fi

# Issue 28's rows: files.grep ÷ rg for each mode, wall and CPU time (user + system),
# interleaved round by round in one run (bench/interleave.py; the load average is printed
# with each table). Target <= 1.0x on every mode.
#   whole process: one `sharedos tools call files.grep` process (the CLI's start, the grant
#     file, the state database, the kernel's gates and audit record, the JSON answer)
#     against one rg process: what a user at a terminal waits for.
#   in-process: one test-binary process doing exactly 5 greps through the provider
#     (TestBenchGrepRepeat; its own start is in the figure, about 1 % of it) against 5 rg
#     processes: the files plane's own cost.
echo
echo "issue 28 rows: files.grep ÷ rg (target <= 1.0x on every mode); load average printed per table"
go build -o "$TMP/sharedos" .
mkdir -p "$TMP/home" "$TMP/state"
cat > "$TMP/grants.yaml" <<'YAML'
version: 1
context:
  actor: agent:bench
  owner: human:ops
grants:
  - id: g-grep
    subject: agent:bench
    issuer: human:ops
    issuedAt: 2026-01-01T00:00:00Z
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [grep]
        scope: descendants
YAML
SOS="$TMP/sharedos --root $TREE --state $TMP/state/state.db --grants $TMP/grants.yaml"
HOME="$TMP/home" XDG_CONFIG_HOME="$TMP/home/config" $SOS namespaces enable files >/dev/null
declare -A CLIARGS
CLIARGS[literal]="-a pattern=ErrUnexpectedEOF -a caseSensitive=true"
CLIARGS[literal-ci]="-a pattern=unexpectedeof"
CLIARGS[regex]="-a mode=regex -a caseSensitive=true"
# rg_cmd NAME: the rg command line of a case (run in $TREE)
rg_cmd() { if [ "$1" = regex ]; then printf 'rg -n -uu %q .' "$REGEX"; else echo "rg ${RGARGS[$1]}"; fi; }
# cli_cmd NAME: the sharedos command line of a case
cli_cmd() {
	if [ "$1" = regex ]; then
		printf '%s tools call files.grep -a path= %s -a pattern=%q -o json' "$SOS" "${CLIARGS[$1]}" "$REGEX"
	else
		echo "$SOS tools call files.grep -a path= ${CLIARGS[$1]} -o json"
	fi
}
echo "match counts, whole process (the answers compared before timing):"
for n in "${NAMES[@]}"; do
	# shellcheck disable=SC2046
	c_cli=$(eval "HOME=$TMP/home XDG_CONFIG_HOME=$TMP/home/config $(cli_cmd "$n")" |
		python3 -c 'import json,sys; o=json.load(sys.stdin)["output"]; print(len(o["matches"]), "truncated" if o["truncated"] else "")')
	c_rg=$(cd "$TREE" && eval "$(rg_cmd "$n")" | wc -l)
	echo "  $n: sharedos tools call files.grep $c_cli  rg $c_rg"
done
# loop5 NAME CMD…: a script running CMD five times in the tree (quoting kept)
loop5() {
	local f="$TMP/$1.sh"
	shift
	{
		printf 'cd %q\nfor i in 1 2 3 4 5; do ' "$TREE"
		printf '%s ' "$@"
		printf '>/dev/null; done\n'
	} > "$f"
	echo "bash $f"
}
# in_cmd NAME: one process doing 5 greps of case NAME in-process
in_cmd() { echo "env FSPLANE_BENCH_GREP=$1 FSPLANE_BENCH_REPEAT=5 $TMP/fsplane.test -test.run ^TestBenchGrepRepeat\$"; }
for n in "${NAMES[@]}"; do
	base_args=()
	if [ -n "${BASE:-}" ]; then # another build, same state: before/after in one run
		base_args=(--cmd "[base] sharedos tools call files.grep $n" "$(cli_cmd "$n" | sed "s|^$TMP/sharedos |$BASE |")")
	fi
	echo
	echo "== $n, whole process: sharedos tools call files.grep ÷ rg (1 process each)"
	(cd "$TREE" && HOME="$TMP/home" XDG_CONFIG_HOME="$TMP/home/config" python3 "$OLDPWD/bench/interleave.py" --runs "$ROUNDS" --warmup 1 \
		--peer "rg $n" "$(rg_cmd "$n")" --cmd "sharedos tools call files.grep $n" "$(cli_cmd "$n")" "${base_args[@]}")
	echo "== $n, in-process: 5 greps in one test-binary process ÷ 5 rg processes"
	FSPLANE_BENCH_ROOT="$TREE" python3 bench/interleave.py --runs "$ROUNDS" --warmup 1 \
		--peer "rg $n x5" "$(loop5 "rg-$n" "$(rg_cmd "$n")")" --cmd "files.grep $n x5 (in-process)" "$(in_cmd "$n")"
done
