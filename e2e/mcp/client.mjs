// End-to-end check of `sharedos mcp` over stdio with the official TypeScript MCP client
// (@modelcontextprotocol/sdk, installed by run.sh into a temp dir). Usage:
//   node client.mjs SHAREDOS_BIN WORKDIR
// WORKDIR holds root/, grants.yaml and state/ (prepared by run.sh). Prints one line per
// check and exits non-zero on the first failure.
import { execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [bin, work] = process.argv.slice(2);
const flags = ["--root", `${work}/root`, "--grants", `${work}/grants.yaml`, "--state", `${work}/state/state.db`];
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

// The stored selection starts empty: enable files and sharedos as an operator would.
execFileSync(bin, [...flags, "namespaces", "enable", "files", "sharedos"], { env });

const transport = new StdioClientTransport({ command: bin, args: [...flags, "mcp", "--log-format", "json"], env, stderr: "pipe" });
let stderr = "";
transport.stderr?.on("data", (d) => { stderr += d; });
const client = new Client({ name: "e2e-ts-client", version: "1.0.0" });
let changed = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
await client.connect(transport);
check(client.getServerCapabilities()?.tools?.listChanged === true, "initialize: capabilities.tools.listChanged");

const list = await client.listTools();
const names = list.tools.map((t) => t.name);
check(names.includes("files.read") && !names.includes("files.delete"), "tools/list is the granted set", names);
check(/^[0-9a-f]{64}$/.test(list._meta?.["sharedos/catalogHash"] ?? ""), "tools/list _meta catalogHash", list._meta);
check(JSON.stringify(names) === JSON.stringify([...names].sort()), "tools/list sorted by name");
const cliList = JSON.parse(execFileSync(bin, [...flags, "tools", "list", "-o", "json"], { env }).toString()).map((d) => d.name).sort();
check(JSON.stringify(cliList) === JSON.stringify(names), "tools/list equals `sharedos tools list`", { cliList, names });

const read = await client.callTool({ name: "files.read", arguments: { path: ["notes", "todo.md"] } });
check(!read.isError && read.structuredContent?.content === "buy milk\n", "allowed call (structuredContent validated by the TS client)", read);

const alias = await client.callTool({ name: "files_read", arguments: { path: ["notes", "todo.md"] } });
check(!alias.isError, "alias files_read calls files.read", alias);

const denied = await client.callTool({ name: "files.create", arguments: { path: ["notes", "x.md"], content: "x" } });
check(denied.isError === true && denied._meta?.["sharedos/status"] === "denied" && denied._meta?.["sharedos/code"] === "tool_unavailable",
  "denied call: isError with sharedos/status and sharedos/code", denied);
check(JSON.parse(denied.content[0].text).hint?.length > 0, "denied call: the text carries the CLI's hint", denied.content[0].text);

const unknown = await client.callTool({ name: "no.such.tool", arguments: {} });
check(unknown.isError === true && unknown._meta?.["sharedos/code"] === "tool_unavailable" && unknown._meta?.["sharedos/cause"] === "not_registered",
  "unknown name: tool_unavailable, not a JSON-RPC error", unknown);

// Another process disables the files namespace: list_changed within 2 s, files tools gone.
execFileSync(bin, [...flags, "namespaces", "disable", "files"], { env });
const t0 = Date.now();
while (changed === 0 && Date.now() - t0 < 2500) await new Promise((r) => setTimeout(r, 50));
check(changed > 0, `notifications/tools/list_changed after 'namespaces disable' (${Date.now() - t0} ms)`);
const after = await client.listTools();
check(!after.tools.some((t) => t.name.startsWith("files.")), "tools/list after disable has no files tools", after.tools.map((t) => t.name));
const disabled = await client.callTool({ name: "files.read", arguments: { path: ["notes", "todo.md"] } });
check(disabled.isError && disabled._meta?.["sharedos/cause"] === "namespace_disabled", "call after disable: namespace_disabled", disabled);

// Escalation: the offered sharedos.escalate is recorded and latches the session.
const esc = await client.callTool({ name: "sharedos.escalate", arguments: { reason: "need write access to notes" } });
check(!esc.isError && JSON.parse(esc.content[0].text).escalated === true, "sharedos.escalate: succeeded with the note", esc);
const latched = await client.callTool({ name: "sharedos.escalate", arguments: { reason: "again" } });
check(latched.isError && latched._meta?.["sharedos/code"] === "escalation_pending", "later calls: escalation_pending in band", latched);
const recs = JSON.parse(execFileSync(bin, [...flags, "escalations", "list", "-o", "json"], { env }).toString());
check(recs.length === 1 && recs[0].status === "pending" && recs[0].reason === "need write access to notes", "escalations list shows the pending escalation", recs);

await client.close();
const audit = JSON.parse(execFileSync(bin, [...flags, "audit", "list", "-o", "json"], { env }).toString());
const events = Array.isArray(audit) ? audit : audit.events ?? [];
const mcpEvents = events.filter((e) => e.metadata?.surface === "mcp");
check(mcpEvents.length > 0 && mcpEvents.every((e) => e.metadata?.client?.name === "e2e-ts-client" && e.metadata?.session),
  `audit: ${mcpEvents.length} events with surface mcp, the session and the client`);
check(stderr.includes('"msg"'), "server logs are JSON lines on stderr");
console.log(`mcp e2e: ${checks} checks passed`);
