// Driver of bench/mcp.sh: times MCP round trips over stdio with the official TypeScript
// client, against a server started as `node mcp-driver.mjs NAME TOOL ARGS_JSON N -- CMD ARGS…`.
// Prints one JSON line: cold start to the first tools/list answer, tools/list p50 (after
// the first), and tools/call p50 / p99 over N sequential calls.
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const [name, tool, argsJSON, nStr] = argv.slice(0, sep);
const [command, ...args] = argv.slice(sep + 1);
const n = Number(nStr);
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };

const t0 = performance.now();
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "ignore" });
const client = new Client({ name: "bench", version: "1" });
await client.connect(transport);
await client.listTools();
const cold = performance.now() - t0;

const lists = [];
for (let i = 0; i < 50; i++) { const s = performance.now(); await client.listTools(); lists.push(performance.now() - s); }
const callArgs = JSON.parse(argsJSON);
for (let i = 0; i < 20; i++) { const r = await client.callTool({ name: tool, arguments: callArgs }); if (r.isError) throw new Error(`${name}: ${JSON.stringify(r)}`); }
const calls = [];
for (let i = 0; i < n; i++) {
  const s = performance.now();
  const r = await client.callTool({ name: tool, arguments: callArgs });
  calls.push(performance.now() - s);
  if (r.isError) throw new Error(`${name}: ${JSON.stringify(r)}`);
}
await client.close();
const us = (ms) => Math.round(ms * 1000);
console.log(JSON.stringify({ name, coldStartUs: us(cold), listP50Us: us(pct(lists, 0.5)), callP50Us: us(pct(calls, 0.5)), callP99Us: us(pct(calls, 0.99)), calls: n }));
