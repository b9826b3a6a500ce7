#!/usr/bin/env bash
# bench/serve-trace.sh — where a loaded `serve` spends a request's time: a runtime trace of
# `sharedos serve` under wrk (POST /v1/authorize, 64 connections), as bench/serve.sh runs
# it, and what the trace says: goroutine delay profiles (time runnable but not running,
# blocked on sync primitives, in system calls), the collector's log (GODEBUG=gctrace=1)
# and the server's own latency histogram beside wrk's percentiles. Run bench/serve.sh
# first (its bench/out-serve holds the state, grants and token this reuses).
#
#   bench/serve-trace.sh                    # 10 s of load, 2 s traced from 5 s in
#   WRK_THREADS=1 bench/serve-trace.sh      # wrk with one thread (it shares the 2 cores)
#
# The binary is built with -tags benchtrace (main_benchtrace.go: ordinary builds do not
# trace). Output: bench/out-serve/trace/{serve.trace,*.pprof,stderr}; open the trace with
# `go tool trace bench/out-serve/trace/serve.trace`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out-serve
[ -f "$out/token" ] || { echo "bench/serve-trace.sh: run bench/serve.sh first (bench/out-serve)" >&2; exit 1; }
t=$out/trace
rm -rf "$t"; mkdir -p "$t"
go build -tags benchtrace -o "$t/sharedos" .
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state" GODEBUG=gctrace=1 \
  SHAREDOS_RUNTIME_TRACE="$t/serve.trace" SHAREDOS_RUNTIME_TRACE_AFTER=5s SHAREDOS_RUNTIME_TRACE_FOR=2s \
  "$t/sharedos" --root "$out/root" --state "$out/state/state.db" serve --listen "127.0.0.1:$port" \
  --tokens "$out/etc/tokens.yaml" 2>"$t/stderr" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
TOKEN=$(cat "$out/token") BODY='{"resource":{"namespace":"files","path":["notes","todo.md"]},"action":"read"}' \
  wrk -t"${WRK_THREADS:-2}" -c64 -d10s --latency -s "$out/post.lua" "http://127.0.0.1:$port/v1/authorize" \
  | sed -n '/Latency Distribution/,/Requests\/sec/p'
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
echo "the server's own histogram (handler start to the access log; no queueing before it):"
curl -fsS "http://127.0.0.1:$port/metrics" | grep 'duration_seconds_bucket{route="/v1/authorize"' \
  | sed 's/sharedos_http_request_duration_seconds_bucket{route="\/v1\/authorize",/  /'
kill $pid; wait $pid 2>/dev/null || true
echo "collections: $(grep -c '^gc ' "$t/stderr"); the last three:"; grep '^gc ' "$t/stderr" | tail -3
for k in sched sync syscall; do
  go tool trace -pprof=$k "$t/serve.trace" > "$t/$k.pprof" 2>/dev/null
  echo "== goroutine delay: $k (top 8 by self time)"
  go tool pprof -top -nodecount=8 "$t/$k.pprof" 2>/dev/null | sed -n '/flat%/,$p'
done
