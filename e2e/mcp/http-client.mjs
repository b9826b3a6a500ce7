// End-to-end check of `sharedos mcp --listen` over streamable HTTP with the official
// TypeScript MCP client (@modelcontextprotocol/sdk, installed by run.sh into a temp dir).
// Usage:
//   node http-client.mjs SHAREDOS_BIN WORKDIR URL TOKEN
// The server runs with WORKDIR/etc/tokens.yaml (prepared by run.sh); TOKEN is the
// token of its entry "e2e" (actor agent:helper, owner human:alice). Prints one line per
// check and exits non-zero on the first failure.
import { execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [bin, work, url, token] = process.argv.slice(2);
const flags = ["--state", `${work}/state/state.db`, "--owner", "human:alice"];
const env = { PATH: process.env.PATH, HOME: `${work}/home`, XDG_CONFIG_HOME: `${work}/xdg/config`, XDG_STATE_HOME: `${work}/xdg/state` };

let checks = 0;
function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  checks++;
  console.log(`ok   ${what}`);
}

// 401 before any session work: the exact shape, no session id.
const raw = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }) });
check(raw.status === 401 && (await raw.text()).trim() === '{"error":"unauthorized"}' && raw.headers.get("www-authenticate") === 'Bearer realm="sharedos"' && !raw.headers.get("mcp-session-id"),
  "401 without a token: {\"error\":\"unauthorized\"} and www-authenticate");
let refused = null;
try {
  const c = new Client({ name: "no-token", version: "1" });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
} catch (e) { refused = e; }
check(refused !== null && /401|nauthorized/.test(String(refused?.code ?? "") + String(refused?.message ?? refused)), "the TypeScript client without a token is refused (401)", String(refused));
const health = await fetch(url.replace(/\/mcp$/, "/health"));
check(health.status === 200 && JSON.stringify(await health.json()) === '{"status":"ok","protocolVersion":"1"}', "/health without a token");

const client = new Client({ name: "e2e-ts-http-client", version: "1.0.0" });
let changed = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
await client.connect(transport);
check(client.getServerCapabilities()?.tools?.listChanged === true, "HTTP initialize: capabilities.tools.listChanged");
check(typeof transport.sessionId === "string" && transport.sessionId.length > 0, "HTTP session id assigned");

const list = await client.listTools();
const names = list.tools.map((t) => t.name);
check(names.includes("files.read") && !names.includes("files.create"), "HTTP tools/list is the token's granted set", names);
check(/^[0-9a-f]{64}$/.test(list._meta?.["sharedos/catalogHash"] ?? ""), "HTTP tools/list _meta catalogHash");

const read = await client.callTool({ name: "files.read", arguments: { path: ["notes", "todo.md"] } });
check(!read.isError && read.structuredContent?.content === "buy milk\n", "HTTP allowed call", read);
const denied = await client.callTool({ name: "files.read", arguments: { path: ["private", "secret.md"] } });
check(denied.isError === true && denied._meta?.["sharedos/status"] === "denied" && denied._meta?.["sharedos/code"] === "no_matching_grant",
  "HTTP denied call: isError with sharedos/code no_matching_grant", denied);
const unknown = await client.callTool({ name: "no.such.tool", arguments: {} });
check(unknown.isError === true && unknown._meta?.["sharedos/code"] === "tool_unavailable", "HTTP unknown name: tool_unavailable, not a JSON-RPC error", unknown);

// Another process disables files for the token's owner: list_changed within 2 s.
execFileSync(bin, [...flags, "namespaces", "disable", "files"], { env });
const t0 = Date.now();
while (changed === 0 && Date.now() - t0 < 2500) await new Promise((r) => setTimeout(r, 50));
check(changed > 0, `HTTP notifications/tools/list_changed after 'namespaces disable' (${Date.now() - t0} ms)`);
const after = await client.listTools();
check(!after.tools.some((t) => t.name.startsWith("files.")), "HTTP tools/list after disable has no files tools");
execFileSync(bin, [...flags, "namespaces", "enable", "files"], { env });

const sid = transport.sessionId;
await transport.terminateSession();
await client.close();
const audit = JSON.parse(execFileSync(bin, [...flags, "audit", "list", "-o", "json"], { env }).toString());
const events = (Array.isArray(audit) ? audit : audit.events ?? []).filter((e) => e.metadata?.client?.name === "e2e-ts-http-client");
check(events.length > 0 && events.every((e) => e.metadata?.surface === "mcp" && e.metadata?.token === "e2e" && e.metadata?.session === sid),
  `HTTP audit: ${events.length} events with surface mcp, the session, the client and the token id`);
check(!JSON.stringify(audit).includes(token), "the token itself is nowhere in the audit trail");
console.log(`mcp e2e (HTTP): ${checks} checks passed`);
