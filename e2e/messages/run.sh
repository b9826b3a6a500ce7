#!/usr/bin/env bash
# End to end: two agents, each a `sharedos mcp` server driven by the official TypeScript
# MCP client (@modelcontextprotocol/sdk, installed into a temp dir with
# `npm install --no-save`), talk through the mailbox (issue 24):
#   - agent:writer's client calls messages.request to agent:summarizer;
#   - agent:summarizer is configured as an exec recipient: sharedos runs recipient.mjs as
#     its own turn, which starts its own `sharedos mcp` (the summarizer's identity and
#     grant file, from the environment the runner gives it), reads a file through it,
#     and answers with `sharedos messages reply`;
#   - the writer's call returns the reply's payload, and the audit trail holds both
#     sides: the writer's message.sent and tool.invoked, the summarizer's files.read and
#     its reply's message.sent (replyTo the request), under one trace.
# Skips (exit 0, saying so in its closing line) only when npm is missing.
#
#   e2e/messages/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "messages e2e: SKIPPED — npm/node not installed (the TypeScript MCP client cannot be installed)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
work="$tmp/work"
mkdir -p "$work/root/notes" "$work/state" "$work/home" "$work/xdg/config" "$work/xdg/state" "$tmp/node"
printf 'ship the release on friday\n' > "$work/root/notes/plan.md"
cat > "$work/writer.yaml" <<'YAML'
version: 1
context: {actor: agent:writer, owner: human:alice}
grants:
  - id: g-ask-summarizer
    subject: agent:writer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, summarizer]}
        actions: [send]
        scope: exact
YAML
cat > "$work/summarizer.yaml" <<'YAML'
version: 1
context: {actor: agent:summarizer, owner: human:alice}
grants:
  - id: g-read-notes
    subject: agent:summarizer
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [notes]}
        actions: [list, stat, read]
        scope: descendants
  - id: g-answer-writer
    subject: agent:summarizer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, writer]}
        actions: [send]
        scope: exact
YAML
go build -o "$tmp/sharedos" .
cp e2e/messages/requester.mjs e2e/messages/recipient.mjs "$tmp/node/"
cat > "$work/config.yaml" <<YAML
agents:
  agent:summarizer:
    mode: exec
    command: [node, $tmp/node/recipient.mjs]
    grants: [summarizer.yaml]
messages:
  replyTimeout: 60s
YAML
(cd "$tmp/node" && echo '{"private":true,"type":"module"}' > package.json &&
  npm install --no-save --no-audit --no-fund --loglevel=error @modelcontextprotocol/sdk@1.32 >/dev/null)
echo "TypeScript client: @modelcontextprotocol/sdk $(node -p "require('$tmp/node/node_modules/@modelcontextprotocol/sdk/package.json').version")"
node "$tmp/node/requester.mjs" "$tmp/sharedos" "$work"
