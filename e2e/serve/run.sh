#!/usr/bin/env bash
# End to end: `sharedos serve` driven by clients no one here wrote:
#   - curl: list, allowed call, denied call (200), explain, idempotent replay, 401, 403, 413;
#   - a client generated from api/openapi.yaml by openapi-typescript (types) and driven by
#     openapi-fetch, both installed from the npm registry into a temp dir with
#     `npm install --no-save` (client.mjs asserts the same list).
# Then SIGTERM stops the server gracefully (exit 0). Loopback only. The curl half runs
# whenever curl is there; the npm half skips (saying so) only when npm is missing.
#
#   e2e/serve/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
work="$tmp/work"
mkdir -p "$work/root/notes" "$work/root/drafts" "$work/state" "$work/home" "$work/xdg/config" "$work/xdg/state" "$work/etc"
printf 'buy milk\n' > "$work/root/notes/todo.md"
cat > "$work/etc/grants.yaml" <<'YAML'
version: 1
context: {actor: agent:helper, owner: human:alice}
grants:
  - id: g-read
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [list, stat, read]
        scope: descendants
  - id: g-drafts
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [drafts]}
        actions: [create]
        scope: descendants
YAML
newtoken() { printf 'sharedos_%s' "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
agent=$(newtoken)
operator=$(newtoken)
cat > "$work/etc/tokens.yaml" <<YAML
version: 1
tokens:
  - id: e2e-agent
    sha256: $(sha "$agent")
    context: {actor: agent:helper, owner: human:alice}
    grants: [grants.yaml]
  - id: e2e-operator
    sha256: $(sha "$operator")
    context: {actor: agent:helper, owner: human:alice}
    grants: [grants.yaml]
    role: operator
YAML
go build -o "$tmp/sharedos" .
sos() { HOME="$work/home" XDG_CONFIG_HOME="$work/xdg/config" XDG_STATE_HOME="$work/xdg/state" "$tmp/sharedos" "$@"; }
sos --state "$work/state/state.db" --owner human:alice namespaces enable files >/dev/null
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
base="http://127.0.0.1:$port"
# started as a simple command, so that $! is the server itself
HOME="$work/home" XDG_CONFIG_HOME="$work/xdg/config" XDG_STATE_HOME="$work/xdg/state" \
  "$tmp/sharedos" --root "$work/root" --state "$work/state/state.db" serve --listen "127.0.0.1:$port" --tokens "$work/etc/tokens.yaml" 2> "$tmp/serve.log" &
server=$!
for _ in $(seq 1 200); do curl -fsS "$base/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
curl -fsS "$base/readyz" >/dev/null || { echo "serve did not become ready" >&2; cat "$tmp/serve.log" >&2; exit 1; }

fail() { echo "serve e2e (curl): $*" >&2; cat "$tmp/serve.log" >&2; exit 1; }
# req METHOD PATH TOKEN [BODY [HEADER]] → $status and $body
req() {
  local args=(-sS -o "$tmp/body" -w '%{http_code}' -X "$1" "$base$2")
  [ -n "$3" ] && args+=(-H "authorization: Bearer $3")
  [ -n "${4:-}" ] && args+=(--data-binary "@$4")
  [ -n "${5:-}" ] && args+=(-H "$5")
  status=$(curl "${args[@]}")
  body=$(cat "$tmp/body")
}
call() { printf '{"id":"%s","tool":"%s","arguments":%s,"traceId":"trace-curl","requestedAt":"2026-01-01T00:00:00Z"}' "$1" "$2" "$3" > "$tmp/call.json"; }

req GET /v1/tools "$agent";                    [ "$status" = 200 ] && grep -q '"name":"files.read"' <<<"$body" || fail "list: $status $body"
call k1 files.read '{"path":["notes","todo.md"]}'
req POST /v1/tools/invoke "$agent" "$tmp/call.json"; [ "$status" = 200 ] && grep -q '"status":"succeeded"' <<<"$body" || fail "allowed: $status $body"
call k2 files.delete '{"path":["notes","todo.md"]}'
req POST /v1/tools/invoke "$agent" "$tmp/call.json"; [ "$status" = 200 ] && grep -q '"status":"denied"' <<<"$body" || fail "denied: $status $body"
[ -f "$work/root/notes/todo.md" ] || fail "the denied delete removed the file"
req POST /v1/tools/explain "$agent" "$tmp/call.json"; [ "$status" = 200 ] && grep -q '"kind":"add_grant"' <<<"$body" || fail "explain: $status $body"
call k3 files.create '{"path":["drafts","curl.md"],"content":"once"}'
req POST /v1/tools/invoke "$agent" "$tmp/call.json" "Idempotency-Key: curl-key"; first=$body
req POST /v1/tools/invoke "$agent" "$tmp/call.json" "Idempotency-Key: curl-key"
[ "$status" = 200 ] && [ "$body" = "$first" ] || fail "replay: $status $body (first: $first)"
req GET /v1/tools "";                          [ "$status" = 401 ] && grep -q '"code":"unauthorized"' <<<"$body" || fail "401: $status $body"
req GET /v1/admin/audit "$agent";              [ "$status" = 403 ] && grep -q '"code":"permission_denied"' <<<"$body" || fail "403: $status $body"
head -c $((5 << 20)) /dev/zero | tr '\0' 'a' | sed 's/^/{"x":"/;s/$/"}/' > "$tmp/big.json"
req POST /v1/tools/invoke "$agent" "$tmp/big.json"; [ "$status" = 413 ] && grep -q '"code":"payload_too_large"' <<<"$body" || fail "413: $status $body"
echo "serve e2e (curl): list, allowed, denied, explain, idempotent replay, 401, 403, 413: ok"

if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  mkdir -p "$tmp/node"
  cp e2e/serve/client.mjs "$tmp/node/"
  (cd "$tmp/node" && echo '{"private":true,"type":"module"}' > package.json &&
    npm install --no-save --no-audit --no-fund --loglevel=error openapi-typescript@7 openapi-fetch@0.14 typescript@5 >/dev/null)
  "$tmp/node/node_modules/.bin/openapi-typescript" api/openapi.yaml -o "$tmp/node/schema.d.ts" >/dev/null
  grep -q '"/v1/tools/invoke"' "$tmp/node/schema.d.ts" || fail "openapi-typescript generated no /v1/tools/invoke"
  node "$tmp/node/client.mjs" "$base" "$agent" "$operator" || fail "openapi-fetch client"
else
  echo "serve e2e (openapi-fetch): SKIPPED — npm/node not installed"
fi

kill -TERM "$server"
wait "$server" || fail "serve did not exit 0 on SIGTERM"
server=""
echo "serve e2e: ok"
