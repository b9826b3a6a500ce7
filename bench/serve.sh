#!/usr/bin/env bash
# bench/serve.sh — loopback throughput and latency of `sharedos serve` with wrk (installed
# with apt-get when missing), 1 process, 64 connections, for:
#   - POST /v1/authorize (the dry run: no spend; audited) under a 1,000-grant authority;
#   - POST /v1/tools/invoke files.read (SQLite store: one spent use per call when bounded,
#     here unbounded; the write-ahead audit records);
# and prints req/s, p50 and p95 of each, their ratio, and the load average (the machine is
# shared: figures are only comparable within one run).
#
#   bench/serve.sh                 # 10 s per case
#   DURATION=30s bench/serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-10s}
conns=${CONNS:-64}
out=bench/out-serve
rm -rf "$out"
mkdir -p "$out/root/notes" "$out/state" "$out/home" "$out/xdg/config" "$out/xdg/state" "$out/etc"
printf 'buy milk\n' > "$out/root/notes/todo.md"

if ! command -v wrk >/dev/null 2>&1; then
  echo "installing wrk" >&2
  (apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }) \
    || { echo "wrk is not available; install it and re-run" >&2; exit 1; }
fi
go build -o "$out/sharedos" .

# 1,000 grants: read under 999 folders that are not notes, and one that covers notes.
{
  echo "version: 1"
  echo "context: {actor: agent:bench, owner: human:alice}"
  echo "grants:"
  for i in $(seq 1 999); do
    printf '  - id: g-%d\n    subject: agent:bench\n    issuer: human:alice\n    capabilities:\n      - resource: {namespace: files, path: [d%d]}\n        actions: [read, list]\n        scope: descendants\n' "$i" "$i"
  done
  printf '  - id: g-notes\n    subject: agent:bench\n    issuer: human:alice\n    capabilities:\n      - resource: {namespace: files, path: [notes]}\n        actions: [read, list, stat]\n        scope: descendants\n'
} > "$out/etc/grants.yaml"
token="sharedos_bench$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$token" > "$out/token" # for bench/serve-start.py and bench/remote.sh
cat > "$out/etc/tokens.yaml" <<YAML
version: 1
tokens:
  - id: bench
    sha256: $(printf '%s' "$token" | sha256sum | cut -d' ' -f1)
    context: {actor: agent:bench, owner: human:alice}
    grants: [grants.yaml]
YAML
sos() { HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state" "$out/sharedos" "$@"; }
sos --root "$out/root" --state "$out/state/state.db" --owner human:alice namespaces enable files >/dev/null
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
base="http://127.0.0.1:$port"
HOME="$out/home" XDG_CONFIG_HOME="$out/xdg/config" XDG_STATE_HOME="$out/xdg/state" \
  "$out/sharedos" --root "$out/root" --state "$out/state/state.db" serve --listen "127.0.0.1:$port" \
  --tokens "$out/etc/tokens.yaml" 2>/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do curl -fsS "$base/readyz" >/dev/null 2>&1 && break; sleep 0.05; done

cat > "$out/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("TOKEN")
wrk.body = os.getenv("BODY")
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.0f %.3f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, summary.errors.status, summary.requests))
end
LUA
run() { # name path body
  TOKEN="$token" BODY="$3" wrk -t2 -c"$conns" -d"$duration" --latency -s "$out/post.lua" "$base$2" | grep '^RESULT' | sed "s/^RESULT/$1/"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
authz=$(run authorize /v1/authorize '{"resource":{"namespace":"files","path":["notes","todo.md"]},"action":"read"}')
invoke=$(run invoke /v1/tools/invoke '{"id":"bench","tool":"files.read","arguments":{"path":["notes","todo.md"]},"traceId":"bench","requestedAt":"2026-01-01T00:00:00Z"}')
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %10s %9s %9s %8s %9s\n' case req/s p50_ms p95_ms non2xx requests
for r in "$authz" "$invoke"; do
  set -- $r
  printf '%-10s %10s %9s %9s %8s %9s\n' "$1" "$2" "$3" "$4" "$5" "$6"
done
set -- $authz; a=$2; set -- $invoke; i=$2
echo "ratio invoke/authorize req/s: $(python3 -c "print(round($i/$a, 3))")"
