#!/usr/bin/env bash
# End to end: `sharedos mcp` over stdio driven by a real MCP client no one here wrote, the
# official TypeScript SDK (@modelcontextprotocol/sdk 1.32.x, installed from the npm registry
# into a temp dir with `npm install --no-save`): list, allowed call, alias, denied call,
# unknown name, list_changed after `namespaces disable` from another process, the
# escalation latch, audit metadata. Skips (exit 0, saying so in its closing line) only
# when npm is missing.
#
#   e2e/mcp/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "mcp e2e: SKIPPED — npm/node not installed (the TypeScript MCP client cannot be installed)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
work="$tmp/work"
mkdir -p "$work/root/notes" "$work/state" "$work/home" "$work/xdg/config" "$work/xdg/state" "$tmp/node"
printf 'buy milk\n' > "$work/root/notes/todo.md"
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
cp e2e/mcp/client.mjs "$tmp/node/"
(cd "$tmp/node" && echo '{"private":true,"type":"module"}' > package.json &&
  npm install --no-save --no-audit --no-fund --loglevel=error @modelcontextprotocol/sdk@1.32 >/dev/null)
echo "TypeScript client: @modelcontextprotocol/sdk $(node -p "require('$tmp/node/node_modules/@modelcontextprotocol/sdk/package.json').version")"
node "$tmp/node/client.mjs" "$tmp/sharedos" "$work"
