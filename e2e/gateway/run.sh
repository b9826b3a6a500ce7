#!/usr/bin/env bash
# End to end: a real third-party MCP server no one here wrote
# (@modelcontextprotocol/server-filesystem, from the npm registry) gated through
# `sharedos mcp` with requirement templates, driven by the official TypeScript SDK client
# (@modelcontextprotocol/sdk 1.32.x). Both are installed into a temp dir with
# `npm install --no-save`. Checks: only granted tools listed, the listing equals
# `sharedos tools list`; a read inside the grant allowed, outside it denied
# no_matching_grant, '..' and absolute paths refused invalid_tool_arguments before the
# server sees them; a write allowed in the granted folder only (the file appears, or
# not); explain names the templated resource; the audit trail has the calls. Skips
# (exit 0, saying so) only when npm is missing.
#
#   e2e/gateway/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "gateway e2e: SKIPPED — npm/node not installed (the filesystem MCP server and the TypeScript client cannot be installed)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
work="$tmp/work"
served="$work/served" # the upstream server's allowed directory (not the sharedos root)
mkdir -p "$work/root" "$work/state" "$work/home" "$work/xdg/config" "$work/xdg/state" "$tmp/node" \
  "$served/docs/drafts" "$served/secret"
printf 'hello from docs\n' > "$served/docs/a.md"
printf 'top secret\n' > "$served/secret/b.md"
go build -o "$tmp/sharedos" .
cp e2e/gateway/client.mjs "$tmp/node/"
(cd "$tmp/node" && echo '{"private":true,"type":"module"}' > package.json &&
  npm install --no-save --no-audit --no-fund --loglevel=error @modelcontextprotocol/sdk@1.32 @modelcontextprotocol/server-filesystem >/dev/null)
server="$tmp/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
cat > "$work/config.yaml" <<YAML
defaultNamespaces: [fs]
mcpServers:
  - id: fs
    command: [node, "$server", "$served"]
    env: {FS_E2E_MARK: {fromEnv: FS_E2E_MARK}}
    callTimeout: 20s
    tools:
      read_text_file:
        action: read
        resource: {path: [{arg: /path, split: "/"}]}
      list_directory:
        action: list
        resource: {path: [{arg: /path, split: "/"}]}
      write_file:
        action: write
        resource: {path: [{arg: /path, split: "/"}]}
      search_files:
        action: search
        resource: {path: [{arg: /path, split: "/"}]}
YAML
cat > "$work/grants.yaml" <<'YAML'
version: 1
context: {actor: agent:helper, owner: human:alice}
grants:
  - id: g-docs
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: fs, path: [docs]}
        actions: [read, list]
        scope: descendants
      - resource: {namespace: fs, path: [docs, drafts]}
        actions: [write]
        scope: descendants
YAML
echo "TypeScript client: @modelcontextprotocol/sdk $(node -p "require('$tmp/node/node_modules/@modelcontextprotocol/sdk/package.json').version"); upstream: @modelcontextprotocol/server-filesystem $(node -p "require('$tmp/node/node_modules/@modelcontextprotocol/server-filesystem/package.json').version")"
# the server resolves relative paths against its working directory: sharedos (and so
# the server it starts) runs in the served directory
(cd "$served" && FS_E2E_MARK=e2e-mark UNRELATED_E2E_SECRET=must-not-leak node "$tmp/node/client.mjs" "$tmp/sharedos" "$work")
