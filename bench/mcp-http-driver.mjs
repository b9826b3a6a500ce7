// Driver of bench/mcp.sh for streamable HTTP: the official TypeScript client against a
// running `sharedos mcp --listen`.
//   node mcp-http-driver.mjs calls URL TOKEN SESSIONS CALLS TOOL ARGS_JSON
//     opens SESSIONS sessions, then each makes CALLS sequential calls, all sessions at
//     once; prints one JSON line: calls/s over the whole run, p50/p99 of one call.
//   node mcp-http-driver.mjs hold URL TOKEN SESSIONS TOOL ARGS_JSON
//     opens SESSIONS sessions (each lists and calls once), prints "ready", and holds them
//     open until killed.
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, url, token, nStr, ...rest] = process.argv.slice(2);
const sessions = Number(nStr);
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
async function open() {
  const c = new Client({ name: "bench-http", version: "1" });
  await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return c;
}
const clients = await Promise.all(Array.from({ length: sessions }, open));
if (mode === "hold") {
  const [tool, argsJSON] = rest;
  for (const c of clients) {
    await c.listTools();
    const r = await c.callTool({ name: tool, arguments: JSON.parse(argsJSON) });
    if (r.isError) throw new Error(JSON.stringify(r));
  }
  console.log("ready");
  setInterval(() => {}, 1 << 30);
} else {
  const [callsStr, tool, argsJSON] = rest;
  const calls = Number(callsStr);
  const args = JSON.parse(argsJSON);
  for (const c of clients) for (let i = 0; i < 20; i++) await c.callTool({ name: tool, arguments: args });
  const lat = [];
  const t0 = performance.now();
  await Promise.all(clients.map(async (c) => {
    for (let i = 0; i < calls; i++) {
      const s = performance.now();
      const r = await c.callTool({ name: tool, arguments: args });
      lat.push(performance.now() - s);
      if (r.isError) throw new Error(JSON.stringify(r));
    }
  }));
  const secs = (performance.now() - t0) / 1000;
  await Promise.all(clients.map((c) => c.close()));
  const us = (ms) => Math.round(ms * 1000);
  console.log(JSON.stringify({ name: "sharedos-http", sessions, calls: sessions * calls, seconds: Number(secs.toFixed(2)),
    callsPerSec: Math.round((sessions * calls) / secs), callP50Us: us(pct(lat, 0.5)), callP99Us: us(pct(lat, 0.99)) }));
}
