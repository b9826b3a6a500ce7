#!/usr/bin/env bash
# bench/pg.sh — `sharedos serve` over PostgreSQL against the database's own ceiling, in one
# run on one machine (issue 23's speed rows):
#   - pgbench -N (simple-update) TPS, CONNS clients, on the same cluster;
#   - wrk on POST /v1/tools/invoke files.read spending one use of a bounded grant per call,
#     the calls spread over GRANTS distinct grants (no hot row), CONNS connections: req/s,
#     p50/p95, and the ratio to pgbench's TPS (target ≥ 0.5, p95 ≤ 20 ms);
#   - the same on one hot grant (every call spends from one counter row): the serialized
#     ceiling — each spend holds the counter's row lock from its reserve to its commit
#     (reserve → audit → commit, ADR 0029), so spends of one grant run one at a time;
#   - wrk on POST /v1/authorize (no spend) on PostgreSQL and on SQLite (a second serve
#     over a state file): the ratio PostgreSQL/SQLite (target ≥ 1/1.5);
# and the load average (the machine may be shared: compare within one run).
#
# A throwaway cluster is started from the Debian binaries (/usr/lib/postgresql/*/bin, as
# the postgres user when run as root) with fsync on, and stopped at the end. Every wait is
# bounded (timeouts on the cluster, pgbench, wrk — SIGINT, so that it still prints what
# it measured — curl, and the servers' and the cluster's stop). Why the first version
# hung: it started serve through a shell function in the background, so $! was a
# subshell's pid; the EXIT trap killed the subshell and left serve running with the
# script's stdout open, so a caller reading that output (a pipe, $(…)) waited for an EOF
# that never came. The server is now started directly, its output to a log.
#
# CPU per request (cpu_us columns): the serve process's and the whole cluster's (postmaster,
# its live backends and the ones that exited) CPU time over the case, read from /proc,
# divided by the requests of the case.
#
#   bench/pg.sh                     # 10 s per case
#   DURATION=30s CONNS=64 bench/pg.sh
#   BIN=/tmp/sharedos-old bench/pg.sh   # another build (before/after in turn; no build)
#   BASE=/tmp/sharedos-old bench/pg.sh  # also that build, interleaved: its own serve on the
#                                       # same database and on its own SQLite file; the
#                                       # authorize cases run ROUNDS times (default 3) in
#                                       # turn, new then old, with a ratio row per pair
#   ONLY=authorize bench/pg.sh          # the authorize cases only (no pgbench, no invoke)
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-10s}
conns=${CONNS:-64}
grants=${GRANTS:-1000}
out=$(pwd)/bench/out-pg
. bench/lib.sh
pg_bin
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/root" "$out/home" "$out/xdg/config" "$out/xdg/state" "$out/etc" "$out/pg"
pgport=$(freeport)
pg_start "$out/pg" "$pgport" max_connections=300
servers=()
cleanup() {
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${servers[@]}"; do timeout 20 tail --pid="$p" -f /dev/null 2>/dev/null || kill -9 "$p" 2>/dev/null || true; done
  as_pg timeout 60 "$bin/pg_ctl" -D "$out/pg/data" -m immediate -t 30 stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
timeout 60 "$bin/createdb" -h 127.0.0.1 -p "$pgport" -U postgres pgbench
timeout 60 "$bin/createdb" -h 127.0.0.1 -p "$pgport" -U postgres sharedos
dsn="postgres://postgres@127.0.0.1:$pgport/sharedos?sslmode=disable"

if [ -n "${BIN:-}" ]; then cp "$BIN" "$out/sharedos"; else go build -o "$out/sharedos" .; fi
[ -n "${BASE:-}" ] && cp "$BASE" "$out/sharedos-base"
{
  echo "version: 1"
  echo "context: {actor: agent:bench, owner: human:alice}"
  echo "grants:"
  mkdir -p "$out/root/hot"; printf 'x\n' > "$out/root/hot/x.md"
  printf '  - id: g-hot\n    subject: agent:bench\n    issuer: human:alice\n    capabilities:\n      - resource: {namespace: files, path: [hot]}\n        actions: [read]\n        scope: descendants\n    constraints: {maxUses: 100000000}\n'
  for i in $(seq 1 "$grants"); do
    mkdir -p "$out/root/d$i"; printf 'x\n' > "$out/root/d$i/x.md"
    printf '  - id: g-%d\n    subject: agent:bench\n    issuer: human:alice\n    capabilities:\n      - resource: {namespace: files, path: [d%d]}\n        actions: [read]\n        scope: descendants\n    constraints: {maxUses: 100000000}\n' "$i" "$i"
  done
} > "$out/etc/grants.yaml"
bench_tokens "$out/etc"
sos() { HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state" "$out/sharedos" "$@"; }
sos store migrate --state "$dsn" >/dev/null
sqlite="$out/state/state.db"
mkdir -p "$out/state"
sos --root "$out/root" --state "$dsn" --owner human:alice namespaces enable files >/dev/null
sos --root "$out/root" --state "$sqlite" --owner human:alice namespaces enable files >/dev/null
start_serve() { # state, port, log[, binary]
  # not through sos: $! must be the server's own pid (a backgrounded function's is a
  # subshell's, and killing it left the server running with this script's stdout open)
  HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state" \
    "${4:-$out/sharedos}" --root "$out/root" --state "$1" serve --listen "127.0.0.1:$2" --tokens "$out/etc/tokens.yaml" >"$3" 2>&1 &
  servers+=($!)
  for _ in $(seq 1 400); do curl -fsS --max-time 2 "http://127.0.0.1:$2/readyz" >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "serve ($1) did not become ready:" >&2; tail -3 "$3" >&2; exit 1
}
port=$(freeport); base="http://127.0.0.1:$port"
start_serve "$dsn" "$port" "$out/serve.log"
sport=$(freeport); sbase="http://127.0.0.1:$sport"
start_serve "$sqlite" "$sport" "$out/serve-sqlite.log"
if [ -n "${BASE:-}" ]; then # the old build: a replica on the same database, its own SQLite file
  bsqlite="$out/state-base/state.db"
  mkdir -p "$out/state-base"
  sos --root "$out/root" --state "$bsqlite" --owner human:alice namespaces enable files >/dev/null
  bport=$(freeport); bbase="http://127.0.0.1:$bport"
  start_serve "$dsn" "$bport" "$out/serve-base.log" "$out/sharedos-base"
  bsport=$(freeport); bsbase="http://127.0.0.1:$bsport"
  start_serve "$bsqlite" "$bsport" "$out/serve-base-sqlite.log" "$out/sharedos-base"
fi

# invoke.lua: a spending call, on one of the distinct grants (HOT=0) or the hot one
for hot in 0 1; do
cat > "$out/invoke$hot.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
local n = 0
request = function()
  n = n + 1
  local dir = "hot"
  if $hot == 0 then dir = "d" .. math.random(1, $grants) end
  local body = string.format('{"id":"b-%d-%d","tool":"files.read","arguments":{"path":["%s","x.md"]},"traceId":"bench","requestedAt":"2026-01-01T00:00:00Z"}', n, math.random(1, 1e9), dir)
  return wrk.format(nil, "/v1/tools/invoke", nil, body)
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.0f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, summary.errors.status + summary.errors.timeout, summary.requests))
end
LUA
done
cat > "$out/authorize.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
wrk.body = '{"resource":{"namespace":"files","path":["d1","x.md"]},"action":"read"}'
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.0f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, summary.errors.status + summary.errors.timeout, summary.requests))
end
LUA

secs=${duration%s}
# wrk stops at its duration; the timeout (SIGINT: wrk prints what it measured) bounds a
# server that stops answering.
# cputicks PID...: user+system CPU clock ticks of the processes (with their waited-for
# children's)
cputicks() {
  local t=0 p f
  for p in "$@"; do
    f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    f=${f##*) }; set -- $f
    t=$((t + ${12} + ${13} + ${14} + ${15}))
  done
  echo "$t"
}
pgpids() { local pm; pm=$(head -1 "$out/pg/data/postmaster.pid"); echo "$pm" $(pgrep -P "$pm"); }
hz=$(getconf CLK_TCK)
load() { # name, lua, base, serve pid
  local r s0 p0 s1 p1
  s0=$(cputicks "$4"); p0=$(cputicks $(pgpids))
  r=$(timeout -s INT $((secs + 60)) wrk -t2 -c"$conns" -d"$duration" --timeout 10s --latency -s "$2" "$3" 2>&1 | grep '^RESULT' || true)
  s1=$(cputicks "$4"); p1=$(cputicks $(pgpids))
  [ -n "$r" ] || r="RESULT 0 - - - 0"
  set -- "$1" $r "$((s1 - s0))" "$((p1 - p0))"
  local cs cp
  cs=$(python3 -c "n=int('$7' or 0);print(round(($8)*1e6/$hz/n) if n else '-')")
  cp=$(python3 -c "n=int('$7' or 0);print(round(($9)*1e6/$hz/n) if n else '-')")
  printf '%-26s %10s %9s %9s %8s %9s %9s %9s\n' "$1" "$3" "$4" "$5" "$6" "$7" "$cs" "$cp"
  echo "$3" > "$out/rate-${1// /_}"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
tps=
[ "${ONLY:-}" = authorize ] || {
timeout 900 "$bin/pgbench" -h 127.0.0.1 -p "$pgport" -U postgres -i -q -s 10 pgbench >/dev/null 2>&1
tps=$(timeout $((secs + 120)) "$bin/pgbench" -h 127.0.0.1 -p "$pgport" -U postgres -N -c "$conns" -j 2 -T "$secs" pgbench 2>/dev/null |
  sed -n 's/^tps = \([0-9.]*\).*/\1/p' | tail -1)
}
printf '%-26s %10s %9s %9s %8s %9s %9s %9s\n' case per_s p50_ms p95_ms errors requests serve_us pg_us
r() { cat "$out/rate-${1// /_}"; }
ratio() { python3 -c "a,b=float('$1' or 0),float('$2' or 0);print(round(a/b,3) if b else '-')"; }
if [ "${ONLY:-}" != authorize ]; then
printf '%-26s %10s\n' "pgbench -N (tps)" "${tps%.*}"
load "invoke distinct pg" "$out/invoke0.lua" "$base" "${servers[0]}"
load "invoke hot grant pg" "$out/invoke1.lua" "$base" "${servers[0]}"
fi
if [ -z "${BASE:-}" ]; then
load "authorize pg" "$out/authorize.lua" "$base/v1/authorize" "${servers[0]}"
load "authorize sqlite" "$out/authorize.lua" "$sbase/v1/authorize" "${servers[1]}"
else # interleaved rounds, new then old
  for i in $(seq 1 "${ROUNDS:-3}"); do
    load "authorize pg $i" "$out/authorize.lua" "$base/v1/authorize" "${servers[0]}"
    load "authorize sqlite $i" "$out/authorize.lua" "$sbase/v1/authorize" "${servers[1]}"
    load "base authorize pg $i" "$out/authorize.lua" "$bbase/v1/authorize" "${servers[2]}"
    load "base authorize sqlite $i" "$out/authorize.lua" "$bsbase/v1/authorize" "${servers[3]}"
    echo "round $i: pg/sqlite new $(ratio "$(r "authorize pg $i")" "$(r "authorize sqlite $i")"), base $(ratio "$(r "base authorize pg $i")" "$(r "base authorize sqlite $i")"); pg new/base $(ratio "$(r "authorize pg $i")" "$(r "base authorize pg $i")")"
  done
  # the summary rows: the rates summed over the rounds (a ratio of sums)
  for c in authorize_pg authorize_sqlite base_authorize_pg base_authorize_sqlite; do
    cat "$out"/rate-"$c"_[0-9]* | awk '{s+=$1} END{print s}' > "$out/rate-$c"
  done
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${ONLY:-}" != authorize ]; then
echo "ratio invoke distinct / pgbench -N:  $(ratio "$(r 'invoke distinct pg')" "$tps")   (target >= 0.5)"
echo "ratio invoke hot / invoke distinct:  $(ratio "$(r 'invoke hot grant pg')" "$(r 'invoke distinct pg')")"
fi
echo "ratio authorize pg / sqlite:         $(ratio "$(r 'authorize pg')" "$(r 'authorize sqlite')")   (target >= 0.667)"
if [ -n "${BASE:-}" ]; then
echo "ratio base authorize pg / sqlite:    $(ratio "$(r 'base authorize pg')" "$(r 'base authorize sqlite')")   (the old build, same rounds)"
echo "ratio authorize pg new / base:       $(ratio "$(r 'authorize pg')" "$(r 'base authorize pg')")"
fi
