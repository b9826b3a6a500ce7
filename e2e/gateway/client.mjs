// End-to-end check of the gateway: `sharedos mcp` gating @modelcontextprotocol/server-filesystem
// with requirement templates, driven by the official TypeScript MCP client. Usage (from the
// served directory):
//   node client.mjs SHAREDOS_BIN WORKDIR
// Prints one line per check and exits non-zero on the first failure.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, work] = process.argv.slice(2);
const flags = ["--config", `${work}/config.yaml`, "--root", `${work}/root`, "--grants", `${work}/grants.yaml`,
  "--state", `${work}/state/state.db`];
const env = { PATH: process.env.PATH, HOME: `${work}/home`, XDG_CONFIG_HOME: `${work}/xdg/config`,
  XDG_STATE_HOME: `${work}/xdg/state`, FS_E2E_MARK: process.env.FS_E2E_MARK, UNRELATED_E2E_SECRET: process.env.UNRELATED_E2E_SECRET };

let checks = 0;
function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  checks++;
  console.log(`ok   ${what}`);
}

const transport = new StdioClientTransport({ command: bin, args: [...flags, "mcp", "--log-format", "json"], env, stderr: "pipe" });
let stderr = "";
transport.stderr?.on("data", (d) => { stderr += d; });
const client = new Client({ name: "e2e-gateway-client", version: "1.0.0" });
await client.connect(transport);

const list = await client.listTools();
const names = list.tools.map((t) => t.name);
check(names.includes("fs.read_text_file") && names.includes("fs.list_directory") && names.includes("fs.write_file"),
  "tools/list has the mapped, granted tools", names);
check(!names.includes("fs.search_files") && !names.some((n) => n.startsWith("fs.move")),
  "tools/list hides a mapped tool no grant discovers, and every unmapped one", names);
const cliList = JSON.parse(execFileSync(bin, [...flags, "tools", "list", "-o", "json"], { env }).toString()).map((d) => d.name).sort();
check(JSON.stringify(cliList) === JSON.stringify([...names].sort()), "tools/list equals `sharedos tools list`", { cliList, names });
const readDef = list.tools.find((t) => t.name === "fs.read_text_file");
check(readDef.inputSchema?.properties?.path?.type === "string" && readDef.annotations?.readOnlyHint === true,
  "the upstream's input schema and readOnlyHint are passed through", readDef);

const textOf = (r) => (r.content ?? []).map((c) => c.text ?? "").join("\n");

const read = await client.callTool({ name: "fs.read_text_file", arguments: { path: "docs/a.md" } });
check(!read.isError && textOf(read).includes("hello from docs"), "read inside the grant: allowed, the server's answer passed through", read);

const denied = await client.callTool({ name: "fs.read_text_file", arguments: { path: "secret/b.md" } });
check(denied.isError && denied._meta?.["sharedos/code"] === "no_matching_grant" && !textOf(denied).includes("top secret"),
  "read outside the grant: denied no_matching_grant", denied);

const dotdot = await client.callTool({ name: "fs.read_text_file", arguments: { path: "docs/../secret/b.md" } });
check(dotdot.isError && dotdot._meta?.["sharedos/code"] === "invalid_tool_arguments" && !textOf(dotdot).includes("top secret"),
  "'..' in the path: invalid_tool_arguments before the server sees it", dotdot);

const abs = await client.callTool({ name: "fs.read_text_file", arguments: { path: `${process.cwd()}/secret/b.md` } });
check(abs.isError && abs._meta?.["sharedos/code"] === "invalid_tool_arguments", "an absolute path (an empty piece): invalid_tool_arguments", abs);

const badType = await client.callTool({ name: "fs.read_text_file", arguments: { path: ["docs", "a.md"] } });
check(badType.isError && badType._meta?.["sharedos/code"] === "invalid_tool_arguments", "arguments against the upstream's schema: invalid_tool_arguments", badType);

const ls = await client.callTool({ name: "fs.list_directory", arguments: { path: "docs" } });
check(!ls.isError && textOf(ls).includes("a.md"), "list inside the grant: allowed", ls);

const w1 = await client.callTool({ name: "fs.write_file", arguments: { path: "docs/drafts/new.md", content: "draft" } });
check(!w1.isError && readFileSync("docs/drafts/new.md", "utf8") === "draft", "write inside the write grant: the file is written", w1);
const w2 = await client.callTool({ name: "fs.write_file", arguments: { path: "docs/overwrite.md", content: "x" } });
check(w2.isError && w2._meta?.["sharedos/code"] === "no_matching_grant" && !existsSync("docs/overwrite.md"),
  "write outside the write grant: denied, nothing written", w2);

await client.close();

let explained = "";
try {
  execFileSync(bin, [...flags, "explain", "fs.read_text_file", "-a", "path=secret/b.md", "-o", "json"], { env });
} catch (e) {
  explained = e.stdout.toString();
}
const ex = JSON.parse(explained);
check(ex.refusal?.code === "no_matching_grant" && JSON.stringify(ex.fixes?.[0]?.grant?.capabilities?.[0]?.resource?.path) === '["secret","b.md"]',
  "explain: the fix names the templated resource fs:[secret, b.md]", ex.fixes);

const audit = JSON.parse(execFileSync(bin, [...flags, "audit", "list", "-o", "json"], { env }).toString());
const events = Array.isArray(audit) ? audit : audit.events ?? [];
check(events.some((e) => e.tool === "fs.read_text_file" && e.metadata?.surface === "mcp"), "audit: the gated calls recorded with surface mcp");
check(!stderr.includes("must-not-leak"), "the caller's other variables are in no log line");
console.log(`gateway e2e: ${checks} checks passed`);
