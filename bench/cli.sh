#!/usr/bin/env bash
# Start-up benchmark of the sharedos CLI (spec 40 §6): `sharedos tools list -o json` with
# a 1,000-grant file (YAML, then JSON) and both planes registered, timed from process
# start over >= 20 runs with hyperfine (installed with apt-get when missing). Prints the
# median of each case; the target is <= 15 ms.
#
#   bench/cli.sh            # 30 runs per case
#   RUNS=50 bench/cli.sh
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
gen() { # $1 = yaml|json
  local n=1000
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
hyperfine --warmup 3 --runs "$runs" -N --export-json "$out/hyperfine.json" \
  -n "tools list, 1,000-grant YAML" "$bin --root $root --grants $PWD/$out/grants.yaml tools list -o json" \
  -n "tools list, 1,000-grant JSON" "$bin --root $root --grants $PWD/$out/grants.json tools list -o json" \
  -n "namespaces list, 1,000-grant YAML" "$bin --root $root --grants $PWD/$out/grants.yaml namespaces list -o json" \
  -n "version (process floor)" "$bin version -o json" \
  "${peer[@]}" >&2

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (timings scale with it)"
python3 - "$out/hyperfine.json" <<'PY'
import json, statistics, sys
results = json.load(open(sys.argv[1]))["results"]
floor = statistics.median(results[-1]["times"])
for r in results:
    med = statistics.median(r["times"])
    print(f'{r["command"]:<36} median {med * 1000:6.2f} ms  min {min(r["times"]) * 1000:6.2f} ms'
          f'  (mean {r["mean"] * 1000:.2f} ± {r["stddev"] * 1000:.2f} ms, {len(r["times"])} runs)'
          f'  {med / floor:4.1f}x the last row')
PY
