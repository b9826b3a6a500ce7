#!/usr/bin/env bash
# bench/pg-audit.sh — `sharedos audit list --limit 20` over PostgreSQL at 10 million audit
# events (issue 23: ≤ 50 ms), with no filter and with each filter of the command.
#
# A throwaway cluster is started from the Debian binaries (/usr/lib/postgresql/*/bin, as
# the postgres user when run as root; fsync off: the bench reads) and stopped at the end.
# The trail is filled in SQL, not through the API: the schema is migrated by
# `sharedos store migrate`, the secondary indexes of audit_events are dropped, EVENTS rows
# are inserted by one INSERT … SELECT generate_series (each a copy of one real event
# under its own id; type, outcome, tool, owner, actor and instant spread so that each
# filter below selects a rare value: about 1 event in 100,000), and the indexes are
# built again as the migrations define them (faster than maintaining them row by row).
#
# Prints, per case: the server's execution time of the store's query (EXPLAIN ANALYZE,
# median of 5, the process start and the connection excluded), then the whole command
# timed by bench/interleave.py (median wall and CPU time over RUNS runs, interleaved, and
# the ratio to `sharedos version`, the process's own start), and the load average. With
# PgBouncer installed, each command is also timed through it (session pooling: the
# "pooled:" rows) and the cost of one connection is printed, direct and pooled.
#
#   bench/pg-audit.sh                 # 10,000,000 events (minutes to fill)
#   EVENTS=1000000 RUNS=10 bench/pg-audit.sh
#   REUSE=1 bench/pg-audit.sh         # time again over the cluster a previous run filled
#
# The cluster's files (about 14 GB at 10 million events) stay in bench/out-pg-audit for
# REUSE; delete the folder when done.
set -euo pipefail
cd "$(dirname "$0")/.."
events=${EVENTS:-10000000}
runs=${RUNS:-15}
out=$(pwd)/bench/out-pg-audit
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "no PostgreSQL binaries under /usr/lib/postgresql: apt-get install postgresql" >&2; exit 1; }
reuse=${REUSE:-}
[ -n "$reuse" ] && [ ! -d "$out/pg/data" ] && { echo "REUSE=1: no cluster in $out (run once without it)" >&2; exit 1; }
[ -z "$reuse" ] && rm -rf "$out"
mkdir -p "$out/root" "$out/home" "$out/xdg/config" "$out/xdg/state" "$out/pg"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$out/pg"
pgport=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
[ -z "$reuse" ] && as_pg "$bin/initdb" -D "$out/pg/data" -U postgres --auth=trust -E UTF8 --no-instructions >/dev/null
as_pg timeout 120 "$bin/pg_ctl" -D "$out/pg/data" -l "$out/pg/log" -w -t 100 -o "-p $pgport -k $out/pg -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c maintenance_work_mem=256MB -c max_wal_size=4GB -c shared_buffers=256MB" start >/dev/null
cleanup() { as_pg timeout 300 "$bin/pg_ctl" -D "$out/pg/data" -m fast -t 280 stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
psql() { timeout "${PSQL_TIMEOUT:-3600}" "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pgport" -U postgres -d sharedos "$@"; }
[ -z "$reuse" ] && timeout 60 "$bin/createdb" -h 127.0.0.1 -p "$pgport" -U postgres sharedos
dsn="postgres://postgres@127.0.0.1:$pgport/sharedos?sslmode=disable"

go build -o "$out/sharedos" .
sos() { HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state" "$out/sharedos" "$@"; }
sos store migrate --state "$dsn" >/dev/null
if [ -z "$reuse" ]; then
# one real event (a namespace selection's record), the template of every row
sos --root "$out/root" --state "$dsn" --owner human:alice namespaces enable files >/dev/null

echo "load average before the fill: $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s)
psql <<SQL
CREATE TEMP TABLE idx AS SELECT indexname, indexdef FROM pg_indexes
	WHERE tablename = 'audit_events' AND indexname NOT IN ('audit_events_pkey', 'audit_events_id_key');
DO \$\$ DECLARE r record; BEGIN
	FOR r IN SELECT indexname FROM idx LOOP EXECUTE 'DROP INDEX ' || quote_ident(r.indexname); END LOOP;
END \$\$;
INSERT INTO audit_events (id, type, outcome, at, at_ms, tool, operation_id, trace_id, world, owner, actor, event)
SELECT 'b' || i,
	CASE WHEN i % 100000 = 7 THEN 'escalation.requested' WHEN i % 3 = 0 THEN 'tool.invoked' ELSE 'authorization.checked' END,
	CASE WHEN i % 100000 = 9 THEN 'escalated' WHEN i % 7 = 0 THEN 'denied' ELSE 'allowed' END,
	to_char(to_timestamp((1700000000000 + i * 100) / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
	1700000000000 + i * 100,
	CASE WHEN i % 100000 = 10 THEN 'rare.tool' ELSE 'files.read' END,
	'c' || i, 't' || (i / 3), 'default',
	CASE WHEN i % 100000 = 11 THEN 'human:rare' ELSE 'human:u' || (i % 100) END,
	CASE WHEN i % 100000 = 12 THEN 'agent:rare' ELSE 'agent:a' || (i % 50) END,
	jsonb_set(t.event::jsonb, '{id}', to_jsonb('b' || i))::text
FROM generate_series(1, $events) AS i, (SELECT event FROM audit_events ORDER BY seq LIMIT 1) AS t;
DO \$\$ DECLARE r record; BEGIN
	FOR r IN SELECT indexdef FROM idx LOOP EXECUTE r.indexdef; END LOOP;
END \$\$;
VACUUM ANALYZE audit_events;
SQL
echo "filled in $(( $(date +%s) - t0 )) s; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
n=$(psql -At -c "SELECT count(*) FROM audit_events")
events=$(( n - 1 ))
echo "$n events in the trail"

since=$(python3 -c "import datetime;print(datetime.datetime.fromtimestamp((1700000000000+$events*100-60000)/1000,datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'))")
cases=(
  "no filter|"
  "--type escalation.requested|--type escalation.requested"
  "--type 2 types|--type escalation.requested,turn.ended"
  "--outcome escalated|--outcome escalated"
  "--tool rare.tool|--tool rare.tool"
  "--owner human:rare|--owner human:rare"
  "--actor agent:rare|--actor agent:rare"
  "--since (last minute)|--since $since"
  "--calls --since|--calls --since $since"
)
# The store's query, by the server (the exact SQL of pgstore's auditQuery is not
# reproduced here: the command's own query is what -o json times below; this row is its
# lower bound, the walk of the index).
printf '\n%-24s %12s\n' "query (server)" "exec_ms"
for c in "${cases[@]}"; do
  name=${c%%|*}; flags=${c#*|}
  where="true"
  case "$flags" in
    *escalation.requested,turn.ended*) where="type = ANY('{escalation.requested,turn.ended}')";;
    *escalation.requested*) where="type = 'escalation.requested'";;
    *"--outcome escalated"*) where="outcome = 'escalated'";;
    *rare.tool*) where="tool = 'rare.tool'";;
    *human:rare*) where="owner = 'human:rare'";;
    *agent:rare*) where="actor = 'agent:rare'";;
  esac
  case "$flags" in
    *--calls*) where="type = 'tool.invoked' AND at_ms >= $(( 1700000000000 + events * 100 - 60000 ))";;
    *--since*) where="at_ms >= $(( 1700000000000 + events * 100 - 60000 ))";;
  esac
  ms=$(for _ in 1 2 3 4 5; do
    psql -At -c "EXPLAIN (ANALYZE, FORMAT JSON) SELECT seq, event FROM audit_events WHERE $where ORDER BY at_ms DESC NULLS LAST, seq DESC LIMIT 20" |
      python3 -c 'import json,sys;print(json.load(sys.stdin)[0]["Execution Time"])'
  done | sort -n | sed -n 3p)
  printf '%-24s %12s\n' "$name" "$ms"
done
echo "(two types: the store splits it into one limited walk per type; this row is the = ANY form, for comparison)"

# A connection pooler in front of the server (PgBouncer, session mode, when installed:
# apt-get install pgbouncer; POOLER=0 skips it): what an operator whose commands connect
# once each would configure. Each command's connection then attaches to a server backend
# the pooler keeps (no fork of a backend, its catalog caches warm) instead of a new one.
pooled=
if [ "${POOLER:-1}" != 0 ] && command -v pgbouncer >/dev/null; then
  mkdir -p "$out/pgb"; [ "$(id -u)" = 0 ] && chown postgres "$out/pgb"
  bport=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
  cat >"$out/pgb/pgb.ini" <<INI
[databases]
sharedos = host=127.0.0.1 port=$pgport dbname=sharedos
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $out/pgb/users.txt
pool_mode = session
default_pool_size = 4
logfile = $out/pgb/pgb.log
pidfile = $out/pgb/pgb.pid
INI
  echo '"postgres" ""' >"$out/pgb/users.txt"
  [ "$(id -u)" = 0 ] && chown postgres "$out/pgb/pgb.ini" "$out/pgb/users.txt"
  as_pg pgbouncer -d "$out/pgb/pgb.ini"
  trap 'kill "$(cat "$out/pgb/pgb.pid" 2>/dev/null)" 2>/dev/null || true; cleanup' EXIT
  for _ in $(seq 50); do [ -s "$out/pgb/pgb.pid" ] && break; sleep 0.1; done
  pooled="postgres://postgres@127.0.0.1:$bport/sharedos?sslmode=disable"
fi

# A connection's cost alone (a raw protocol client: TCP connect, startup, trust auth,
# then the schema check's one statement), median of 20, direct and through the pooler.
conncost() {
  python3 - "$1" <<'PY'
import socket, struct, sys, time
port = int(sys.argv[1])
def until_ready(s):
    buf = b""
    while not buf.endswith(b"Z\0\0\0\x05I"):
        b = s.recv(8192)
        if not b: raise SystemExit("connection closed")
        buf += b
def once():
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    body = struct.pack("!I", 196608) + b"user\0postgres\0database\0sharedos\0\0"
    s.sendall(struct.pack("!I", len(body) + 4) + body)
    until_ready(s)
    t1 = time.perf_counter()
    q = b"SELECT max(version_id) FROM sharedos_schema_version WHERE is_applied\0"
    s.sendall(b"Q" + struct.pack("!I", len(q) + 4) + q)
    until_ready(s)
    t2 = time.perf_counter()
    s.sendall(b"X\0\0\0\x04"); s.close()
    return (t1 - t0) * 1000, (t2 - t1) * 1000
r = [once() for _ in range(20)]
c = sorted(x[0] for x in r); q = sorted(x[1] for x in r)
print("connect+startup p50 %7.2f ms, first statement p50 %6.2f ms" % (c[10], q[10]))
PY
}
echo
printf '%-24s ' "connection (direct)"; conncost "$pgport"
[ -n "$pooled" ] && { printf '%-24s ' "connection (pgbouncer)"; conncost "$bport"; }

echo
args=(--peer "sharedos version" "$out/sharedos version")
for c in "${cases[@]}"; do
  name=${c%%|*}; flags=${c#*|}
  args+=(--cmd "audit list $name" "env HOME=$out/home XDG_CONFIG_HOME=$out/xdg/config XDG_STATE_HOME=$out/xdg/state $out/sharedos --root $out/root --state $dsn audit list --limit 20 -o json $flags")
  [ -n "$pooled" ] && args+=(--cmd "  pooled: $name" "env HOME=$out/home XDG_CONFIG_HOME=$out/xdg/config XDG_STATE_HOME=$out/xdg/state $out/sharedos --root $out/root --state $pooled audit list --limit 20 -o json $flags")
done
# each listing returns its events (checked once, untimed)
for c in "${cases[@]}"; do
  flags=${c#*|}
  # shellcheck disable=SC2086
  got=$(sos --root "$out/root" --state "$dsn" audit list --limit 20 -o json $flags | python3 -c 'import json,sys;print(len(json.load(sys.stdin)))')
  [ "$got" -gt 0 ] || { echo "audit list $flags returned no events" >&2; exit 1; }
done
timeout 1800 python3 bench/interleave.py --runs "$runs" --warmup 2 "${args[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
