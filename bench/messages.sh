#!/usr/bin/env bash
# Round-trip benchmark of messages.request (issue 24), SQLite state database: one
# `sharedos tools call messages.request` process whose exec recipient (a shell script
# running `sharedos messages reply` at once) answers — two sharedos processes and a shell
# per round trip: the request authorized, spent and stored durably, the recipient's turn
# run, its reply authorized and stored durably, the reply read back and returned — timed
# from process start, interleaved with `sharedos version` (the process floor) and
# `messages send` (the one-way durable send) in one run (bench/interleave.py) — the row
# "messages.request round trip, exec recipient replying at once" is that whole process;
# then the round trip from a running `sharedos mcp` session (the agent's usual setting:
# only the recipient's process start in it; bench/messages-mcp.py). Prints each
# case's p50 and p95 wall time, its CPU time, and the load average before and after; then
# the PostgreSQL rows (pkg/httpapi TestBenchMessagesPostgres: mailbox throughput, send +
# deliver unbatched; the round trip through serve replicas, a wait recipient answering
# through another replica, twice: the waiter woken by NOTIFY, and with NOTIFY dropped —
# its 1 s fallback poll alone).
#
#   bench/messages.sh             # 30 runs per case
#   RUNS=50 bench/messages.sh
#   BASE=/tmp/old-sharedos SKIP_PG=1 bench/messages.sh   # the parts rows of an older build beside
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-30}
out=bench/out/messages
rm -rf "$out"
mkdir -p "$out/root" "$out/home" "$out/xdg/config" "$out/xdg/state" "$out/state"
g="$PWD/$out"
go build -o "$out/sharedos" .
bin="$g/sharedos"
cat > "$out/writer.yaml" <<'YAML'
version: 1
context: {actor: agent:writer, owner: human:ops}
grants:
  - id: g-ask
    subject: agent:writer
    issuer: human:ops
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, echo]}
        actions: [send]
        scope: exact
      - resource: {namespace: sharedos.messaging, path: [agent, inbox]}
        actions: [send]
        scope: exact
YAML
cat > "$out/echo.yaml" <<'YAML'
version: 1
context: {actor: agent:echo, owner: human:ops}
grants:
  - id: g-answer
    subject: agent:echo
    issuer: human:ops
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, writer]}
        actions: [send]
        scope: exact
YAML
cat > "$out/echo.sh" <<'SH'
#!/bin/sh
exec "$SHAREDOS_BIN" messages reply "$SHAREDOS_MESSAGE_ID" --payload '{"ok":true}' >/dev/null
SH
chmod 0755 "$out/echo.sh"
cat > "$out/config.yaml" <<YAML
agents:
  agent:echo: {mode: exec, command: [$g/echo.sh], grants: [echo.yaml]}
  agent:inbox: {mode: wait}
messages:
  maxInFlight: 1000000
YAML
# the Go toolchain's caches and settings stay the user's (the PostgreSQL rows run go test)
go_env=(HOME="$HOME" XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-$HOME/.config}")
export HOME="$g/home" XDG_CONFIG_HOME="$g/xdg/config" XDG_STATE_HOME="$g/xdg/state"
export SHAREDOS_CONFIG="$g/config.yaml" SHAREDOS_ROOT="$g/root" SHAREDOS_STATE="$g/state/state.db" SHAREDOS_GRANTS="$g/writer.yaml"
"$bin" namespaces enable messages >/dev/null
args='{"recipient":{"kind":"agent","agentId":"echo"},"payload":{"n":1}}'
request="$bin tools call messages.request -o json --args '$args'" # split by bench/interleave.py (shlex)
# the round trip must succeed before it is timed
"$bin" tools call messages.request -o json --args "$args" | grep -q '"ok": true' ||
  { echo "messages.request did not return the reply" >&2; exit 1; }
python3 bench/interleave.py --runs "$runs" --warmup 3 \
  --peer "sharedos version (process floor)" "$bin version -o json" \
  --cmd "messages send (one-way, durable)" "$bin messages send --to agent:inbox --payload '{\"n\":1}' -o json" \
  --cmd "messages.request round trip, exec recipient replying at once" "$request" \
  --json "$out/interleave.json"
python3 - "$out/interleave.json" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
rows = d.get("samples", d) if isinstance(d, dict) else d
def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
items = rows.items() if isinstance(rows, dict) else [(r["name"], r) for r in rows]
for name, r in items:
    wall = r["wall"] if isinstance(r, dict) else r
    print(f"{name}: wall p50 {statistics.median(wall)*1000:.1f} ms, p95 {p95(wall)*1000:.1f} ms")
PY
# The same round trip from a running host: one `sharedos mcp` stdio session driven by a
# raw client (bench/messages-mcp.py), so that only the recipient's process start (its
# `sharedos messages reply`) is in each trip, not the requester's.
RUNS="$runs" CALL_ARGS="$args" python3 bench/messages-mcp.py "$bin" mcp
# The round trip broken into its parts (the caller before the recipient's exec, its
# shell, the `sharedos messages reply` process, its exit to the answer; fsyncs of each),
# and the reply process alone beside `sharedos version` (wall, CPU, page faults, ratio):
# bench/messages-parts.py. BASE=/path/to/an/older/sharedos adds that build's rows in
# the same interleaved rounds (A/B under one load).
cat > "$out/inbox.yaml" <<'YAML'
version: 1
context: {actor: agent:inbox, owner: human:ops}
grants:
  - id: g-inbox-answer
    subject: agent:inbox
    issuer: human:ops
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, writer]}
        actions: [send]
        scope: exact
YAML
INBOX_GRANTS="$g/inbox.yaml" RUNS="$runs" CALL_ARGS="$args" python3 bench/messages-parts.py "$bin" ${BASE:+"$BASE"}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# The PostgreSQL rows (a throwaway cluster from the Debian binaries, via internal/pgtest,
# fsync off: indicative): the mailbox's send + deliver throughput, unbatched, and the
# messages.request round trip through two serve replicas with a wait recipient answering
# through the other one, with NOTIFY and with NOTIFY dropped (poll only). SKIP_PG=1
# leaves them out.
if [ "${SKIP_PG:-}" != 1 ]; then
  env "${go_env[@]}" SHAREDOS_BENCH_MESSAGES=1 go test ./pkg/httpapi -run '^TestBenchMessagesPostgres$' -count=1 -v |
    sed -n 's/^ROW //p'
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
