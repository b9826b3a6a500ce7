#!/usr/bin/env bash
# bench/pg.sh — `sharedos serve` over PostgreSQL against the database's own ceiling, in one
# run on one machine: pgbench -N (simple-update) TPS, then wrk on POST /v1/tools/invoke
# files.read spending one use of a bounded grant per call, the calls spread over 1,000
# distinct grants (no hot row), 64 connections each; prints both, their ratio, p50/p95 of
# the invoke and the load average (the machine is shared: compare within one run).
#
# A throwaway cluster is started from the Debian binaries (/usr/lib/postgresql/*/bin, as
# the postgres user when run as root) with fsync on, and stopped at the end.
# Status: written at the deadline; its one run served the invoke load and then hung before
# printing (not debugged): no figures yet.
#
#   bench/pg.sh                     # 10 s per case
#   DURATION=30s bench/pg.sh
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-10s}
conns=${CONNS:-64}
grants=${GRANTS:-1000}
out=$(pwd)/bench/out-pg
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "no PostgreSQL binaries under /usr/lib/postgresql: apt-get install postgresql" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/root" "$out/home" "$out/xdg/config" "$out/xdg/state" "$out/etc" "$out/pg"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$out/pg"
pgport=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
as_pg "$bin/initdb" -D "$out/pg/data" -U postgres --auth=trust -E UTF8 --no-instructions >/dev/null
as_pg "$bin/pg_ctl" -D "$out/pg/data" -l "$out/pg/log" -w -o "-p $pgport -k $out/pg -c listen_addresses=127.0.0.1 -c max_connections=300" start >/dev/null
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  as_pg "$bin/pg_ctl" -D "$out/pg/data" -m immediate stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$bin/createdb" -h 127.0.0.1 -p "$pgport" -U postgres pgbench
"$bin/createdb" -h 127.0.0.1 -p "$pgport" -U postgres sharedos
dsn="postgres://postgres@127.0.0.1:$pgport/sharedos?sslmode=disable"

go build -o "$out/sharedos" .
{
  echo "version: 1"
  echo "context: {actor: agent:bench, owner: human:alice}"
  echo "grants:"
  for i in $(seq 1 "$grants"); do
    mkdir -p "$out/root/d$i"; printf 'x\n' > "$out/root/d$i/x.md"
    printf '  - id: g-%d\n    subject: agent:bench\n    issuer: human:alice\n    capabilities:\n      - resource: {namespace: files, path: [d%d]}\n        actions: [read]\n        scope: descendants\n    constraints: {maxUses: 100000000}\n' "$i" "$i"
  done
} > "$out/etc/grants.yaml"
token="sharedos_bench$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
cat > "$out/etc/tokens.yaml" <<YAML
version: 1
tokens:
  - id: bench
    sha256: $(printf '%s' "$token" | sha256sum | cut -d' ' -f1)
    context: {actor: agent:bench, owner: human:alice}
    grants: [grants.yaml]
YAML
sos() { HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state" "$out/sharedos" "$@"; }
sos store migrate --state "$dsn" >/dev/null
sos --root "$out/root" --state "$dsn" --owner human:alice namespaces enable files >/dev/null
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
base="http://127.0.0.1:$port"
sos --root "$out/root" --state "$dsn" serve --listen "127.0.0.1:$port" --tokens "$out/etc/tokens.yaml" 2>"$out/serve.log" &
server=$!
for _ in $(seq 1 400); do curl -fsS "$base/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
curl -fsS "$base/readyz" >/dev/null || { echo "serve did not become ready:" >&2; tail -3 "$out/serve.log" >&2; exit 1; }

cat > "$out/invoke.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
local n = 0
request = function()
  n = n + 1
  local g = math.random(1, $grants)
  local body = string.format('{"id":"b-%d-%d","tool":"files.read","arguments":{"path":["d%d","x.md"]},"traceId":"bench","requestedAt":"2026-01-01T00:00:00Z"}', n, math.random(1, 1e9), g)
  return wrk.format(nil, "/v1/tools/invoke", nil, body)
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.0f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, summary.errors.status, summary.requests))
end
LUA

secs=${duration%s}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/pgbench" -h 127.0.0.1 -p "$pgport" -U postgres -i -q -s 10 pgbench >/dev/null 2>&1
tps=$("$bin/pgbench" -h 127.0.0.1 -p "$pgport" -U postgres -N -c "$conns" -j 2 -T "$secs" pgbench 2>/dev/null |
  sed -n 's/^tps = \([0-9.]*\).*/\1/p' | tail -1)
echo "load average after pgbench: $(cut -d' ' -f1-3 /proc/loadavg)"
set -- $(wrk -t2 -c"$conns" -d"$duration" --latency -s "$out/invoke.lua" "$base" | grep '^RESULT')
echo "load average after wrk:     $(cut -d' ' -f1-3 /proc/loadavg)"
rps=$2
printf '%-22s %10s %9s %9s %8s %9s\n' case per_s p50_ms p95_ms non2xx requests
printf '%-22s %10s\n' "pgbench -N (tps)" "${tps%.*}"
printf '%-22s %10s %9s %9s %8s %9s\n' "invoke, spending" "$2" "$3" "$4" "$5" "$6"
echo "ratio invoke/pgbench: $(python3 -c "print(round($rps/$tps, 3))")"
