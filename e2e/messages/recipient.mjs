// The exec recipient of e2e/messages/run.sh: sharedos runs it as agent:summarizer's turn
// (SHAREDOS_AS, SHAREDOS_GRANTS its own grant file, the request on standard input). It
// starts its own `sharedos mcp` with that environment, reads the file through it, and
// answers with `sharedos messages reply`.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const request = JSON.parse(readFileSync(0, "utf8"));
const bin = process.env.SHAREDOS_BIN;
const transport = new StdioClientTransport({ command: bin, args: ["mcp"], env: process.env, stderr: "inherit" });
const client = new Client({ name: "e2e-summarizer", version: "1.0.0" });
await client.connect(transport);
const path = request.payload.ask.replace(/^summarise /, "").split("/");
const read = await client.callTool({ name: "files.read", arguments: { path } });
if (read.isError) {
  console.error("summarizer: files.read refused:", JSON.stringify(read));
  process.exit(1);
}
await client.close();
const text = read.structuredContent.content.trim();
execFileSync(bin, ["messages", "reply", process.env.SHAREDOS_MESSAGE_ID, "--payload",
  JSON.stringify({ summary: `summarizer read: ${text}`, asker: process.env.SHAREDOS_REQUESTER })], { stdio: ["ignore", "ignore", "inherit"] });
