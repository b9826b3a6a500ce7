#!/usr/bin/env bash
# bench/pg-roundtrips.sh — how many SQL statements (each one client/server round trip with
# pgx's cached prepared statements) one spending POST /v1/tools/invoke costs on
# PostgreSQL, and how many transactions, with and without an Idempotency-Key: a figure
# independent of the machine's speed and load (the speed rows of bench/pg.sh are not).
#
# A throwaway cluster (Debian binaries; as postgres when run as root) logs every
# statement (log_statement=all); after serve is up and warm, N calls (default 20) of each
# kind are sent one at a time and the statements logged meanwhile are counted, then
# printed per call, by kind (BEGIN/COMMIT, the spend, audit inserts, the audit lock,
# idempotency, reads).
#
#   bench/pg-roundtrips.sh
#   N=50 bench/pg-roundtrips.sh
#   BIN=/tmp/sharedos-old bench/pg-roundtrips.sh   # another build (no build)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-20}
out=$(pwd)/bench/out-pg-roundtrips
. bench/lib.sh
pg_bin
rm -rf "$out"
mkdir -p "$out/root/d" "$out/home" "$out/xdg/config" "$out/xdg/state" "$out/etc" "$out/pg"
printf 'x\n' > "$out/root/d/x.md"
pgport=$(freeport)
pg_start "$out/pg" "$pgport" log_statement=all "log_line_prefix=%p: "
server=
cleanup() {
  [ -n "$server" ] && { kill "$server" 2>/dev/null || true; timeout 20 tail --pid="$server" -f /dev/null 2>/dev/null || kill -9 "$server" 2>/dev/null || true; }
  as_pg timeout 60 "$bin/pg_ctl" -D "$out/pg/data" -m immediate -t 30 stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
timeout 60 "$bin/createdb" -h 127.0.0.1 -p "$pgport" -U postgres sharedos
dsn="postgres://postgres@127.0.0.1:$pgport/sharedos?sslmode=disable"
if [ -n "${BIN:-}" ]; then cp "$BIN" "$out/sharedos"; else go build -o "$out/sharedos" .; fi
cat > "$out/etc/grants.yaml" <<YAML
version: 1
context: {actor: agent:bench, owner: human:alice}
grants:
  - id: g-1
    subject: agent:bench
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [d]}
        actions: [read]
        scope: descendants
    constraints: {maxUses: 100000000}
YAML
bench_tokens "$out/etc"
sos() { HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state" "$out/sharedos" "$@"; }
sos store migrate --state "$dsn" >/dev/null
sos --root "$out/root" --state "$dsn" --owner human:alice namespaces enable files >/dev/null
port=$(freeport)
HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state" \
  "$out/sharedos" --root "$out/root" --state "$dsn" serve --listen "127.0.0.1:$port" --tokens "$out/etc/tokens.yaml" >"$out/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 400); do curl -fsS --max-time 2 "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
call() { # id, extra curl args
  curl -fsS --max-time 30 -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "${@:2}" \
    -d "{\"id\":\"$1\",\"tool\":\"files.read\",\"arguments\":{\"path\":[\"d\",\"x.md\"]},\"traceId\":\"bench\",\"requestedAt\":\"2026-01-01T00:00:00Z\"}" \
    "http://127.0.0.1:$port/v1/tools/invoke"
}
for i in 1 2 3; do call "warm-$i"; call "warmk-$i" -H "Idempotency-Key: warm-$i"; done
sleep 1 # the listener's and pollers' statements are counted apart (by backend pid) below
count() { # kind label, then the calls
  local label=$1; shift
  local before after
  before=$(wc -l < "$out/pg/log")
  "$@"
  sleep 0.5
  after=$(wc -l < "$out/pg/log")
  tail -n +"$((before + 1))" "$out/pg/log" | head -n "$((after - before))" > "$out/log-$label"
  python3 - "$out/log-$label" "$n" "$label" <<'PY'
import re, sys, collections
path, n, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kinds = collections.Counter()
total = 0
for line in open(path, errors="replace"):
    m = re.match(r"\d+:\s*LOG:  (?:statement|execute [^:]*): (.*)", line)
    if not m:
        continue
    sql = m.group(1).strip().lower()
    # the revision listener's and the readiness poll's statements are not a call's
    if "sharedos_revision" in sql or sql.startswith("listen") or "sharedos_schema_version" in sql:
        continue
    total += 1
    if sql.startswith("begin"): k = "begin"
    elif sql.startswith("commit") or sql.startswith("rollback"): k = "commit/rollback"
    elif "synchronous_commit" in sql: k = "set synchronous_commit"
    elif "pg_advisory_xact_lock" in sql: k = "audit lock"
    elif "pg_logical_emit_message" in sql: k = "flush round (shared by the commits of the moment)"
    elif "insert into audit_events" in sql: k = "audit insert"
    elif "grant_usage" in sql: k = "spend / usage"
    elif "idempotency" in sql: k = "idempotency"
    else: k = "other: " + sql[:60]
    kinds[k] += 1
print(f"{label}: {total / n:.1f} statements per call")
for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]):
    print(f"    {v / n:5.1f}  {k}")
PY
}
plain() { for i in $(seq 1 "$n"); do call "p-$i"; done; }
keyed() { for i in $(seq 1 "$n"); do call "k-$i" -H "Idempotency-Key: k-$i"; done; }
count "invoke (no key)" plain
count "invoke (Idempotency-Key)" keyed
