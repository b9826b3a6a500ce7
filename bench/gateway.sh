#!/usr/bin/env bash
# Gateway benchmark (issue 14), two figures:
#
# 1. The latency a gated call adds: the fake upstream MCP server (internal/fakemcp, the
#    go-sdk) called directly, then the same server gated through `sharedos mcp`
#    (github.search_code: schema check, template, authorization, audit, the upstream
#    round trip), both driven by the same official TypeScript client in the same run
#    (bench/mcp-driver.mjs). Added latency = gated p50 - direct p50; the target is <= 1 ms.
# 2. `sharedos tools list` from the cache, cold start (a new process each run) with two
#    configured servers, timed with hyperfine (installed with apt-get when missing); the
#    target is <= 15 ms. A plain `tools list` without servers is timed alongside.
#
# Needs node and npm (the client goes to a temp dir with --no-save).
#
#   bench/gateway.sh          # N=2000 calls per server
#   N=500 RUNS=50 bench/gateway.sh
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-2000}
runs=${RUNS:-30}
if ! command -v npm >/dev/null 2>&1; then
  echo "bench/gateway.sh: SKIPPED — npm is not installed"
  exit 0
fi
if ! command -v hyperfine >/dev/null 2>&1; then
  echo "installing hyperfine" >&2
  (apt-get install -y hyperfine >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y hyperfine >/dev/null; }) \
    || { echo "hyperfine is not available; install it and re-run" >&2; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
w="$tmp/work"
mkdir -p "$w/root" "$w/home" "$w/xdg/config" "$w/xdg/state" "$tmp/node"
go build -o "$tmp/sharedos" .
go build -o "$tmp/fakemcp" ./internal/fakemcp/cmd/fakemcp
(cd "$tmp/node" && echo '{"private":true,"type":"module"}' > package.json &&
  npm install --no-save --no-audit --no-fund --loglevel=error @modelcontextprotocol/sdk@1.32 >/dev/null 2>&1)
cp bench/mcp-driver.mjs "$tmp/node/"
export HOME="$w/home" XDG_CONFIG_HOME="$w/xdg/config" XDG_STATE_HOME="$w/xdg/state"
cat > "$w/config.yaml" <<YAML
mcpServers:
  - id: github
    command: ["$tmp/fakemcp"]
    catalogTTL: 1h
    tools:
      search_code: {action: search, resource: {path: [{arg: /query}]}}
      get_file_contents:
        action: read
        resource: {path: [{arg: /owner}, {arg: /repo}, contents, {arg: /path, split: "/"}]}
  - id: notes
    command: ["$tmp/fakemcp"]
    catalogTTL: 1h
    unmapped: gate
YAML
cat > "$w/grants.yaml" <<'YAML'
version: 1
context: {actor: agent:bench, owner: human:ops}
grants:
  - id: g
    subject: agent:bench
    issuer: human:ops
    capabilities:
      - resource: {namespace: github, path: []}
        actions: [search, read]
        scope: descendants
      - resource: {namespace: notes, path: []}
        actions: [call]
        scope: descendants
YAML
flags=(--config "$w/config.yaml" --root "$w/root" --grants "$w/grants.yaml" --state "$w/state.db" --namespaces github,notes)

direct=$(node "$tmp/node/mcp-driver.mjs" direct search_code '{"query":"bench"}' "$n" -- "$tmp/fakemcp")
gated=$(node "$tmp/node/mcp-driver.mjs" gated github.search_code '{"query":"bench"}' "$n" -- "$tmp/sharedos" "${flags[@]}" mcp)
echo "$direct"
echo "$gated"
node -e '
const [d, g] = [JSON.parse(process.argv[1]), JSON.parse(process.argv[2])];
console.log(`added latency of a gated call: p50 ${((g.callP50Us - d.callP50Us) / 1000).toFixed(3)} ms (target <= 1 ms), p99 ${((g.callP99Us - d.callP99Us) / 1000).toFixed(3)} ms`);
' "$direct" "$gated"

# warm the cache (one connection per server), then time cold starts that read it
"$tmp/sharedos" "${flags[@]}" tools list -o json > "$tmp/list.json"
grep -q '"github.search_code"' "$tmp/list.json" && grep -q '"notes.echo_env"' "$tmp/list.json"
hyperfine -N --warmup 3 --runs "$runs" --export-json "$tmp/h.json" \
  -n "tools list, 2 MCP servers from the cache" "$tmp/sharedos ${flags[*]} tools list -o json" \
  -n "tools list, no MCP servers" "$tmp/sharedos --root $w/root --grants $w/grants.yaml --state $w/state.db --namespaces github,notes tools list -o json" >/dev/null
node -e '
const h = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
for (const r of h.results) console.log(`${r.command}: median ${(r.median * 1000).toFixed(2)} ms (target <= 15 ms), mean ${(r.mean * 1000).toFixed(2)} ms over ${r.times.length} runs`);
' "$tmp/h.json"
