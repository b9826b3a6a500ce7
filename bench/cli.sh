#!/usr/bin/env bash
# Start-up benchmark of the sharedos CLI (spec 40 §6, issue 16): `sharedos tools list -o json`
# and `tools call files.read` with a 1,000-grant file (YAML, then JSON; the grant cache warm,
# then removed before every run as on a fresh CI machine), 10,000 grants with the cache
# removed, and `sharedos version` (the process floor), timed from process start with
# hyperfine (installed with apt-get when missing). Prints the median of each case and its
# ratio to `version`. Targets: <= 15 ms; warm <= 1.5x version; cache removed <= 3x
# version; 10,000 grants cache removed <= 60 ms.
#
#   bench/cli.sh                         # 30 runs per case
#   RUNS=50 bench/cli.sh
#   BASE=/tmp/old/sharedos bench/cli.sh  # the same cases for another build, interleaved
#                                        # in the same hyperfine run (before/after)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-30}
out=bench/out
rm -rf "$out"
mkdir -p "$out/root/notes" "$out/xdg/state" "$out/xdg/config" "$out/home"
echo "hello" > "$out/root/notes/a.md"

if ! command -v hyperfine >/dev/null 2>&1; then
  echo "installing hyperfine" >&2
  (apt-get install -y hyperfine >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y hyperfine >/dev/null; }) \
    || { echo "hyperfine is not available; install it and re-run" >&2; exit 1; }
fi

go build -o "$out/sharedos" .

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

peer=()
if command -v git >/dev/null 2>&1; then peer=(-n "git --version (peer process floor)" "$(command -v git) --version"); fi
g="$PWD/$out"
cases=() # name, command, prepare ("-" for none)
add() { cases+=("$1" "$2" "$3"); }
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
  add "${p}tools list, 1,000-grant YAML" "$b $f --grants $g/grants.yaml tools list -o json" -
  add "${p}tools list, 1,000-grant JSON" "$b $f --grants $g/grants.json tools list -o json" -
  add "${p}tools call files.read, 1,000-grant YAML" "$b $f --grants $g/grants.yaml tools call files.read -a path=team-00/proj-0000/a.md -o json" -
  add "${p}namespaces list, 1,000-grant YAML" "$b $f --grants $g/grants.yaml namespaces list -o json" -
  add "${p}tools list, 1,000-grant YAML, cache removed" "$b $f --grants $g/grants.yaml tools list -o json" "rm -rf $cache"
  add "${p}tools list, 10,000-grant YAML, cache removed" "$b $f --grants $g/grants10k.yaml tools list -o json" "rm -rf $cache"
  add "${p}version (process floor)" "$b version -o json" -
done
args=()
for ((i = 0; i < ${#cases[@]}; i += 3)); do
  if [ "${cases[i+2]}" != - ]; then args+=(--prepare "${cases[i+2]}"); else args+=(--prepare true); fi
  args+=(-n "${cases[i]}" "${cases[i+1]}")
done
if [ ${#peer[@]} -gt 0 ]; then args+=(--prepare true "${peer[@]}"); fi
hyperfine --warmup 3 --runs "$runs" -N --export-json "$out/hyperfine.json" "${args[@]}" >&2

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (timings scale with it)"
python3 - "$out/hyperfine.json" <<'PY'
import json, statistics, sys
results = json.load(open(sys.argv[1]))["results"]
floors = {}
for r in results:
    if "version (process floor)" in r["command"]:
        floors[r["command"].split("]")[0]] = statistics.median(r["times"])
for r in results:
    med = statistics.median(r["times"])
    floor = floors.get(r["command"].split("]")[0], next(iter(floors.values())))
    print(f'{r["command"]:<56} median {med * 1000:6.2f} ms  min {min(r["times"]) * 1000:6.2f} ms'
          f'  (mean {r["mean"] * 1000:.2f} ± {r["stddev"] * 1000:.2f} ms, {len(r["times"])} runs)'
          f'  {med / floor:4.2f}x version')
PY
