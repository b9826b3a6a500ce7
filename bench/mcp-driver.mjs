// Driver of bench/mcp.sh: times MCP round trips over stdio with the official TypeScript
// client, against a server started as `node mcp-driver.mjs NAME TOOL ARGS_JSON N -- CMD ARGS…`.
// Prints one JSON line: cold start to the first tools/list answer, tools/list p50 (after
// the first), and tools/call p50 / p99 over N sequential calls.
import { readFileSync } from "node:fs";
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
// CPU time (user + system) of the server process and of the processes it started (a
// gated server's upstream), from /proc, so that a figure per call holds under load.
const cpuUs = (pid) => {
  let total = 0;
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    total += (Number(f[11]) + Number(f[12])) * 10000; // clock ticks of 10 ms (USER_HZ 100)
    for (const t of readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(" ").filter(Boolean)) total += cpuUs(t);
  } catch { /* not Linux, or gone */ }
  return total;
};
const cpu0 = cpuUs(transport.pid);
const calls = [];
for (let i = 0; i < n; i++) {
  const s = performance.now();
  const r = await client.callTool({ name: tool, arguments: callArgs });
  calls.push(performance.now() - s);
  if (r.isError) throw new Error(`${name}: ${JSON.stringify(r)}`);
}
const cpuPerCallUs = Math.round((cpuUs(transport.pid) - cpu0) / n);
await client.close();
const us = (ms) => Math.round(ms * 1000);
console.log(JSON.stringify({ name, coldStartUs: us(cold), listP50Us: us(pct(lists, 0.5)), callP50Us: us(pct(calls, 0.5)), callP99Us: us(pct(calls, 0.99)), cpuPerCallUs, calls: n }));
