#!/usr/bin/env bash
# End to end: `sharedos mcp` driven by real MCP clients no one here wrote, installed from
# the npm registry into a temp dir with `npm install --no-save`:
#   - the official TypeScript SDK (@modelcontextprotocol/sdk 1.32.x) over stdio (client.mjs:
#     list, allowed call, alias, denied call, unknown name, list_changed after `namespaces
#     disable` from another process, the escalation latch, audit metadata) and over
#     streamable HTTP against `sharedos mcp --listen 127.0.0.1:PORT --tokens FILE`
#     (http-client.mjs: 401 shape, list, allowed, denied with its code, unknown name,
#     list_changed from another process, audit with the token id);
#   - the MCP Inspector's CLI mode (@modelcontextprotocol/inspector 2.12.x) over stdio and
#     HTTP, asserting its exit codes: 0 on success, 5 on a denial (isError), 3 on a 401.
# Then SIGTERM stops the HTTP server gracefully (exit 0). Loopback only. Skips (exit 0,
# saying so in its closing line) only when npm is missing.
#
#   e2e/mcp/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "mcp e2e: SKIPPED — npm/node not installed (the TypeScript MCP client cannot be installed)"
  exit 0
fi
tmp=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
work="$tmp/work"
mkdir -p "$work/root/notes" "$work/root/private" "$work/state" "$work/home" "$work/xdg/config" "$work/xdg/state" "$work/etc/grants" "$tmp/node"
printf 'buy milk\n' > "$work/root/notes/todo.md"
printf 'not for agents\n' > "$work/root/private/secret.md"
cat > "$work/grants.yaml" <<'YAML'
version: 1
context: {actor: agent:helper, owner: human:alice}
grants:
  - id: g-read
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [list, stat, read, search]
        scope: descendants
  - id: g-escalate
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos, path: [escalation]}
        actions: [request]
        scope: exact
YAML
go build -o "$tmp/sharedos" .
cp e2e/mcp/client.mjs e2e/mcp/http-client.mjs "$tmp/node/"
(cd "$tmp/node" && echo '{"private":true,"type":"module"}' > package.json &&
  npm install --no-save --no-audit --no-fund --loglevel=error @modelcontextprotocol/sdk@1.32 @modelcontextprotocol/inspector@2.12 >/dev/null)
nm="$tmp/node/node_modules/@modelcontextprotocol"
echo "TypeScript client: @modelcontextprotocol/sdk $(node -p "require('$nm/sdk/package.json').version"); Inspector $(node -p "require('$nm/inspector/package.json').version")"
node "$tmp/node/client.mjs" "$tmp/sharedos" "$work"

# ---- streamable HTTP ------------------------------------------------------------------
sos() { HOME="$work/home" XDG_CONFIG_HOME="$work/xdg/config" XDG_STATE_HOME="$work/xdg/state" "$tmp/sharedos" "$@"; }
cat > "$work/etc/grants/e2e.yaml" <<'YAML'
version: 1
grants:
  - id: g-notes
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [notes]}
        actions: [list, stat, read]
        scope: descendants
YAML
token=$(sos --as agent:helper --owner human:alice --grants "$work/etc/grants/e2e.yaml" tokens create --id e2e --tokens "$work/etc/tokens.yaml" -o json |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).token))')
sos --state "$work/state/state.db" --owner human:alice namespaces enable files >/dev/null
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
url="http://127.0.0.1:$port/mcp"
# started as a simple command, so that $! is the server itself
HOME="$work/home" XDG_CONFIG_HOME="$work/xdg/config" XDG_STATE_HOME="$work/xdg/state" \
  "$tmp/sharedos" --root "$work/root" --state "$work/state/state.db" mcp --listen "127.0.0.1:$port" --tokens "$work/etc/tokens.yaml" --log-format json 2> "$tmp/http.log" &
server=$!
node -e 'const u=process.argv[1];const t0=Date.now();(async function f(){try{if((await fetch(u)).ok)return}catch{}if(Date.now()-t0>10000){console.error("server did not start");process.exit(1)}setTimeout(f,50)})()' "${url%/mcp}/health" ||
  { cat "$tmp/http.log" >&2; exit 1; }
HOME="$work/home" node "$tmp/node/http-client.mjs" "$tmp/sharedos" "$work" "$url" "$token" || { cat "$tmp/http.log" >&2; exit 1; }

# ---- the Inspector's CLI mode: exit codes 0 (success), 5 (isError), 3 (401) ----------------
inspector() { HOME="$work/home" XDG_CONFIG_HOME="$work/xdg/config" XDG_STATE_HOME="$work/xdg/state" node "$nm/inspector/clients/launcher/build/index.js" --cli -q "$@"; }
expect_exit() {
  local want=$1 what=$2
  shift 2
  local got=0
  inspector "$@" > "$tmp/inspector.out" 2> "$tmp/inspector.err" || got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: Inspector $what: exit $got, want $want" >&2
    cat "$tmp/inspector.out" "$tmp/inspector.err" >&2
    exit 1
  fi
  echo "ok   Inspector $what: exit $want"
}
stdio=("$tmp/sharedos" --root "$work/root" --grants "$work/etc/grants/e2e.yaml" --as agent:helper --owner human:alice --state "$work/state/state.db" --namespaces files mcp)
read_notes=(--method tools/call --tool-name files.read --tool-args-json '{"path":["notes","todo.md"]}')
read_private=(--method tools/call --tool-name files.read --tool-args-json '{"path":["private","secret.md"]}')
expect_exit 0 "stdio tools/list" "${stdio[@]}" --method tools/list
grep -q '"files.read"' "$tmp/inspector.out" || { echo "FAIL: Inspector stdio tools/list lacks files.read" >&2; exit 1; }
expect_exit 0 "stdio allowed call" "${stdio[@]}" "${read_notes[@]}"
grep -q 'buy milk' "$tmp/inspector.out" || { echo "FAIL: Inspector stdio call output" >&2; exit 1; }
expect_exit 5 "stdio denied call (isError)" "${stdio[@]}" "${read_private[@]}"
grep -q '"sharedos/code": "no_matching_grant"' "$tmp/inspector.out" || { echo "FAIL: Inspector stdio denial lacks its code" >&2; exit 1; }
auth=(--header "Authorization: Bearer $token")
expect_exit 0 "HTTP tools/list" "$url" --transport http "${auth[@]}" --method tools/list
expect_exit 0 "HTTP allowed call" "$url" --transport http "${auth[@]}" "${read_notes[@]}"
expect_exit 5 "HTTP denied call (isError)" "$url" --transport http "${auth[@]}" "${read_private[@]}"
grep -q '"sharedos/code": "no_matching_grant"' "$tmp/inspector.out" || { echo "FAIL: Inspector HTTP denial lacks its code" >&2; exit 1; }
expect_exit 3 "HTTP without a token (401)" "$url" --transport http --stored-auth-only --method tools/list
expect_exit 3 "HTTP with an unknown token (401)" "$url" --transport http --stored-auth-only --header "Authorization: Bearer sharedos_not-a-token" --method tools/list

# ---- graceful shutdown on SIGTERM ----------------------------------------------------------
kill -TERM "$server"
rc=0
wait "$server" || rc=$?
server=""
if [ "$rc" != 0 ] || ! grep -q '"msg":"server stopped"' "$tmp/http.log"; then
  echo "FAIL: SIGTERM: exit $rc" >&2
  cat "$tmp/http.log" >&2
  exit 1
fi
echo "ok   SIGTERM: the HTTP server drained and exited 0"
echo "mcp e2e: all passed (stdio and HTTP with the TypeScript SDK client; Inspector CLI over stdio and HTTP: exit 0 / 5 / 3)"
