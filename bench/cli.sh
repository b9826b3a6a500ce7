#!/usr/bin/env bash
# Start-up benchmark of the sharedos CLI (spec 40 §6, issue 16): `sharedos tools list -o json`
# and `tools call files.read` with a 1,000-grant file (YAML, then JSON; the grant cache warm,
# then removed before every run as on a fresh CI machine), 10,000 grants with the cache
# removed, and `sharedos version` (the process floor), timed from process start and
# interleaved with `git --version` in one run (bench/interleave.py: every case once per
# round, RUNS rounds). Prints each case's p50 wall and CPU (user + system) time and its
# ratio to `git --version`: issue 28's rows, version <= 2.5x and tools list with 1,000
# grants <= 3x; 10,000 grants with the cache removed <= 60 ms wall. Three floor rows say
# what no command can go below: a Go hello-world, sharedos's packages with an empty main
# (bench/startfloor) and `version` of the Dockerfile's static build.
#
#   bench/cli.sh                         # 30 runs per case
#   RUNS=50 bench/cli.sh
#   BASE=/tmp/old/sharedos bench/cli.sh  # the same cases for another build, interleaved
#                                        # in the same run (before/after)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-30}
out=bench/out
rm -rf "$out"
mkdir -p "$out/root/notes" "$out/xdg/state" "$out/xdg/config" "$out/home"
echo "hello" > "$out/root/notes/a.md"

go build -o "$out/sharedos" .
# The floor of any sharedos command (bench/startfloor: the same binary, main returns at
# once), the same build as the Dockerfile's (CGO off, -trimpath, -s -w; the README's
# `go build` links the C resolver and the dynamic loader), and a Go program linking
# nothing but the runtime: rows that say how much of `version` is the command's own work,
# the build's, and the packages'.
go build -o "$out/startfloor" ./bench/startfloor
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out/sharedos-static" .
mkdir -p "$out/hello"
printf 'package main\n\nimport "os"\n\nfunc main() { os.Stdout.WriteString("hello\\n") }\n' > "$out/hello/main.go"
(cd "$out/hello" && GO111MODULE=off go build -o hello main.go)

# 1,000 grants: files and repo capabilities over 100 folders, a few actions each.
gen() { # $1 = yaml|json, $2 = grant count (default 1,000)
  local n=${2:-1000}
  if [ "$1" = yaml ]; then
    printf 'version: 1\ncontext:\n  actor: agent:bench\n  owner: human:ops\ngrants:\n'
    for ((i = 0; i < n; i++)); do
      ns=files; acts='[read, list, stat]'
      if ((i % 4 == 3)); then ns=repo; acts='[status, log]'; fi
      printf '  - id: g-%04d\n    subject: agent:bench\n    issuer: human:ops\n    issuedAt: 2026-01-01T00:00:00Z\n' "$i"
      printf '    capabilities:\n      - resource: {namespace: %s, path: [team-%02d, proj-%04d]}\n' "$ns" $((i % 100)) "$i"
      printf '        actions: %s\n        scope: descendants\n' "$acts"
      printf '    constraints: {expiresAt: 2030-01-01T00:00:00Z, purposes: [cli, triage]}\n'
    done
  else
    printf '{"version": 1, "context": {"actor": "agent:bench", "owner": "human:ops"}, "grants": [\n'
    for ((i = 0; i < n; i++)); do
      ns=files; acts='"read", "list", "stat"'
      if ((i % 4 == 3)); then ns=repo; acts='"status", "log"'; fi
      sep=','; ((i == n - 1)) && sep=''
      printf '{"id": "g-%04d", "subject": "agent:bench", "issuer": "human:ops", "issuedAt": "2026-01-01T00:00:00Z", ' "$i"
      printf '"capabilities": [{"resource": {"namespace": "%s", "path": ["team-%02d", "proj-%04d"]}, "actions": [%s], "scope": "descendants"}], ' "$ns" $((i % 100)) "$i" "$acts"
      printf '"constraints": {"expiresAt": "2030-01-01T00:00:00Z", "purposes": ["cli", "triage"]}}%s\n' "$sep"
    done
    printf ']}\n'
  fi
}
gen yaml > "$out/grants.yaml"
gen json > "$out/grants.json"
gen yaml 10000 > "$out/grants10k.yaml"
mkdir -p "$out/root/team-00/proj-0000"
echo "hello" > "$out/root/team-00/proj-0000/a.md"

export HOME="$PWD/$out/home" XDG_STATE_HOME="$PWD/$out/xdg/state" XDG_CONFIG_HOME="$PWD/$out/xdg/config"
bin="$PWD/$out/sharedos"
root="$PWD/$out/root"
"$bin" --root "$root" --grants "$out/grants.yaml" namespaces enable files repo >/dev/null
for f in grants.yaml grants.json; do
  n=$("$bin" --root "$root" --grants "$out/$f" tools list -o json | grep -c '"name":')
  echo "$f: tools list shows $n tools"
done

g="$PWD/$out"
# Every case runs once per round, in a rotating order, for RUNS rounds (bench/interleave.py),
# with `git --version` (the per-process floor of a native CLI) as the peer: the ratio rows
# of issue 28 are each case's p50 divided by the peer's in the same run, wall and CPU
# (user + system of the process, which the machine's load disturbs far less).
args=(--runs "$runs" --warmup 3)
command -v git >/dev/null 2>&1 || { echo "git is needed as the peer" >&2; exit 1; }
args+=(--peer "git --version (peer process floor)" "$(command -v git) --version")
args+=(--cmd "floor: Go hello-world (the runtime alone)" "$g/hello/hello")
args+=(--cmd "floor: the sharedos binary, main returns at once (bench/startfloor)" "$g/startfloor")
args+=(--cmd "version, CGO_ENABLED=0 -trimpath -s -w build (the Dockerfile's)" "$g/sharedos-static version -o json")
bins=("new=$bin")
if [ -n "${BASE:-}" ]; then bins=("base=$BASE" "${bins[@]}"); fi
for nb in "${bins[@]}"; do
  tag=${nb%%=*} b=${nb#*=}
  p=""; [ -n "${BASE:-}" ] && p="[$tag] "
  # each build its own state database (a newer schema is refused by an older build) and
  # grant cache beside it
  st="$g/state-$tag/state.db" cache="$g/state-$tag/cache"
  f="--root $root --state $st"
  "$b" $f --grants "$g/grants.yaml" namespaces enable files repo >/dev/null
  # the call must succeed before it is timed
  "$b" $f --grants "$g/grants.yaml" tools call files.read -a path=team-00/proj-0000/a.md -o json >/dev/null
  args+=(--cmd "${p}version (process floor; row: <= 2.5x git --version)" "$b version -o json")
  args+=(--cmd "${p}tools list, 1,000-grant YAML (row: <= 3x git --version)" "$b $f --grants $g/grants.yaml tools list -o json")
  args+=(--cmd "${p}tools list, 1,000-grant JSON" "$b $f --grants $g/grants.json tools list -o json")
  args+=(--cmd "${p}tools call files.read, 1,000-grant YAML" "$b $f --grants $g/grants.yaml tools call files.read -a path=team-00/proj-0000/a.md -o json")
  args+=(--cmd "${p}namespaces list, 1,000-grant YAML" "$b $f --grants $g/grants.yaml namespaces list -o json")
  args+=(--prepare "rm -rf $cache" --cmd "${p}tools list, 1,000-grant YAML, cache removed" "$b $f --grants $g/grants.yaml tools list -o json")
  args+=(--prepare "rm -rf $cache" --cmd "${p}tools list, 10,000-grant YAML, cache removed (<= 60 ms wall)" "$b $f --grants $g/grants10k.yaml tools list -o json")
done
python3 bench/interleave.py "${args[@]}" --json "$out/interleave.json"
# What the floor is made of: every package init of `version` (GODEBUG=inittrace=1), the
# heaviest ones and the totals by module (bench/initfloor.py), and the page faults and
# CPU of the floor rows (perf stat, when perf is installed).
echo
python3 bench/initfloor.py "$bin" 15 20
if command -v perf >/dev/null 2>&1; then
  for c in "$g/hello/hello" "$g/startfloor" "$bin version -o json"; do
    perf stat -x, -e page-faults,task-clock -r 20 $c 2>&1 >/dev/null |
      awk -F, -v c="${c#"$g"/}" '$3=="page-faults"{f=$1} $3=="task-clock"{t=$1} END{printf "perf stat -r 20: %-40s %6d page faults, %7.2f ms task-clock\n", c, f, t}'
  done
fi
# The same starts' page faults by kind (file pages ~2 us, copy-on-write and anonymous
# ~16 us each on the lead's VM; counts, steady under load: the A/B measure of a start-up
# change on a busy machine), with tools list (1,000 grants) of each build.
if command -v perf >/dev/null 2>&1; then
  echo
  pf=(--runs "${PF_RUNS:-7}" -- "Go hello-world" "$g/hello/hello" "startfloor" "$g/startfloor")
  for nb in "${bins[@]}"; do
    tag=${nb%%=*} b=${nb#*=}
    pf+=("[$tag] version" "$b version -o json"
      "[$tag] tools list, 1,000-grant YAML" "$b --root $root --state $g/state-$tag/state.db --grants $g/grants.yaml tools list -o json")
  done
  python3 bench/pagefaults.py "${pf[@]}"
fi
# Issue 28 item 6, the 10,000-grant row's own work (what is above the process floor):
# the load step in process, one cold load on a fresh heap per op, by the direct path and
# by the tree path it replaced (ns/op, CPU time of the process per load, bytes and
# allocations per load; pkg/grantfile BenchmarkCLIRow10k, the same file as the row), and
# the row's page faults and task-clock from process start (perf stat, cache removed
# before every run; on this VM each first touch of an anonymous page costs ~16 us).
echo
echo "10,000-grant row, in process (pkg/grantfile BenchmarkCLIRow10k; direct = this build, tree = the tree path):"
# (with the user's own HOME and configuration: HOME above is the benchmark's, and go would
# fill a new module cache there)
env -u XDG_CONFIG_HOME -u XDG_STATE_HOME HOME="$(getent passwd "$(id -u)" | cut -d: -f6)" \
  go test -run='^$' -bench='CLIRow10k' -benchmem -benchtime=10x ./pkg/grantfile/ | grep '^Benchmark'
if command -v perf >/dev/null 2>&1; then
  for nb in "${bins[@]}"; do
    tag=${nb%%=*} b=${nb#*=}
    st="$g/state-$tag/state.db" cache="$g/state-$tag/cache"
    perf stat -x, -e page-faults,task-clock -r 10 --pre "rm -rf $cache" \
      "$b" --root "$root" --state "$st" --grants "$g/grants10k.yaml" tools list -o json 2>&1 >/dev/null |
      awk -F, -v c="[$tag] tools list, 10,000 grants, cache removed" '$3=="page-faults"{f=$1} $3=="task-clock"{t=$1} END{printf "perf stat -r 10: %-50s %6d page faults, %7.2f ms task-clock\n", c, f, t}'
  done
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
