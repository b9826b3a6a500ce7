// The requester of e2e/messages/run.sh: agent:writer's `sharedos mcp`, driven by the
// official TypeScript MCP client, calls messages.request to agent:summarizer (an exec
// recipient) and checks the reply and the audit trail of both sides. Usage:
//   node requester.mjs SHAREDOS_BIN WORKDIR
import { execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, work] = process.argv.slice(2);
const env = {
  PATH: process.env.PATH, HOME: `${work}/home`, XDG_CONFIG_HOME: `${work}/xdg/config`, XDG_STATE_HOME: `${work}/xdg/state`,
  SHAREDOS_CONFIG: `${work}/config.yaml`, SHAREDOS_ROOT: `${work}/root`, SHAREDOS_STATE: `${work}/state/state.db`,
};
const writer = { ...env, SHAREDOS_GRANTS: `${work}/writer.yaml`, SHAREDOS_PURPOSE: "release-notes", SHAREDOS_TRACE: "trace-e2e-messages" };

let checks = 0;
function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  checks++;
  console.log(`ok   ${what}`);
}

// An operator enables the namespaces: messages for the writer, files for the summarizer.
execFileSync(bin, ["--owner", "human:alice", "namespaces", "enable", "messages", "files"], { env });

const transport = new StdioClientTransport({ command: bin, args: ["mcp", "--log-format", "json"], env: writer, stderr: "pipe" });
let stderr = "";
transport.stderr?.on("data", (d) => { stderr += d; });
const client = new Client({ name: "e2e-writer", version: "1.0.0" });
await client.connect(transport);

const names = (await client.listTools()).tools.map((t) => t.name);
check(names.includes("messages.request"), "the writer's tools/list has messages.request", names);

const res = await client.callTool({ name: "messages.request",
  arguments: { recipient: { kind: "agent", agentId: "summarizer" }, payload: { ask: "summarise notes/plan.md" } } });
check(!res.isError, "messages.request succeeded", { res, stderr });
const reply = res.structuredContent ?? JSON.parse(res.content[0].text);
check(reply.summary === "summarizer read: ship the release on friday" && reply.asker === "agent:writer",
  "the reply is the summarizer's, built from the file it read through its own mcp server", reply);
await client.close();

const audit = (type) => {
  const out = JSON.parse(execFileSync(bin, ["audit", "list", "--type", type, "-o", "json"], { env }).toString());
  return Array.isArray(out) ? out : out.events ?? [];
};
const sent = audit("message.sent");
const request = sent.find((e) => e.metadata?.receiver?.agentId === "summarizer" && !e.metadata?.replyTo);
check(request && request.outcome === "succeeded" && request.traceId === "trace-e2e-messages",
  "audit: the writer's request (message.sent, accepted, the writer's trace)", sent);
const answer = sent.find((e) => e.metadata?.replyTo === request.metadata.messageId);
check(answer && answer.outcome === "succeeded" && answer.metadata?.receiver?.agentId === "writer" && answer.traceId === "trace-e2e-messages",
  "audit: the summarizer's reply (message.sent, replyTo the request, the request's trace)", sent);
const invoked = audit("tool.invoked");
const call = invoked.find((e) => e.tool === "messages.request");
check(call && call.outcome === "succeeded" && call.metadata?.surface === "mcp", "audit: the writer's messages.request over mcp", call);
const read = invoked.find((e) => e.tool === "files.read");
check(read && read.outcome === "succeeded" && read.metadata?.surface === "mcp" && read.traceId === "trace-e2e-messages",
  "audit: the summarizer's files.read over its own mcp server, under the request's trace", read);

const inbox = JSON.parse(execFileSync(bin, ["--as", "agent:summarizer", "messages", "inbox", "-o", "json"], { env }).toString());
check(inbox.length === 1 && inbox[0].status === "answered", "the summarizer's inbox: the request, answered once", inbox);
console.log(`messages e2e: ${checks} checks passed`);
