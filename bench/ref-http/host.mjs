// bench/ref-http/host.mjs — serves the reference implementation's HTTP adapter
// (`@sharedos/http` of Aicoo-Team/SharedOS) on a loopback port, as the peer of
// `sharedos serve` in bench/serve.sh's `POST /v1/authorize` row.
//
// This file is our harness, not the reference's code. The reference's packages are
// reconstructed outside this repository (bench/ref-http/README.md says how); REF_DIR
// names that directory:
//
//   REF_DIR/packages/{contracts,core,http}/src/*.ts   the reference's sources
//   REF_DIR/node_modules/{zod,esbuild,@hono/node-server}
//
// What it does, and why each choice:
//   - Bundles packages/http/src/index.ts with the kernel of packages/core into one ES
//     module (esbuild: types stripped, nothing else changed; zod is bundled as any
//     deployment would) at REF_DIR/.build/ref.mjs, and imports it.
//   - Builds the reference kernel (`new SharedOSKernel()`: its defaults — the
//     CapabilityAuthorizer, a no-op audit sink) and its handler
//     (`createSharedOSHandler({ api: createKernelSharedOSApi({ kernel, turns }) })`).
//     `turns` is never reached by /v1/authorize; it refuses if called.
//   - Its `resolveContext` is the host's trusted boundary (the reference leaves it to
//     the host): it checks the bearer token as `sharedos serve` does (SHA-256 of the
//     presented token against the one configured; 401 otherwise) and returns the access
//     context: actor agent:bench, authority and owner human:alice, and the grants.
//   - The grants mirror bench/serve.sh's grant file: `read, list` under files/d<i>
//     (descendants) for i = 1 … N-1, and, last, g-notes: `read, list, stat` under
//     files/notes. The reference evaluates at most 256 grants in one decision (its
//     AccessContextSchema: grants max 256; later versions: MAX_RESOLVED_GRANTS = 256),
//     so N defaults to 256 — its largest authority — and REF_GRANTS=1000 shows it
//     refusing the 1,000-grant authority (500 invalid_access_context).
//   - Mounted on Node's HTTP server with @hono/node-server, a maintained Fetch-API
//     adapter (the reference's handler is `(Request) => Promise<Response>` and names no
//     Node adapter of its own).
//
// Environment: REF_DIR (required), PORT (default 0: any; the chosen one is printed as
// `listening <port>` on stdout), REF_TOKEN (the one bearer token it accepts; default
// "bench"), REF_GRANTS (default 256).
import { createHash, timingSafeEqual, randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const refDir = process.env.REF_DIR ? resolve(process.env.REF_DIR) : "";
if (!refDir) {
  console.error("host.mjs: REF_DIR is not set (the reconstructed reference; see bench/ref-http/README.md)");
  process.exit(2);
}
const requireRef = createRequire(join(refDir, "package.json"));
let esbuild, nodeServer;
try {
  esbuild = requireRef("esbuild");
  nodeServer = requireRef("@hono/node-server");
} catch (error) {
  console.error(`host.mjs: ${refDir}/node_modules lacks esbuild or @hono/node-server: ${error.message.split("\n")[0]}`);
  process.exit(2);
}

const count = Number(process.env.REF_GRANTS ?? 256);
if (!Number.isInteger(count) || count < 1) {
  console.error(`host.mjs: REF_GRANTS must be a positive integer, not ${process.env.REF_GRANTS}`);
  process.exit(2);
}
const pkg = (name) => join(refDir, "packages", name, "src", "index.ts");
const out = join(refDir, ".build", "ref.mjs");
mkdirSync(join(refDir, ".build"), { recursive: true });
try {
  await esbuild.build({
    stdin: {
      contents: [
        `export { createSharedOSHandler, createKernelSharedOSApi, SharedOSHttpError } from ${JSON.stringify(pkg("http"))};`,
        `export { SharedOSKernel } from ${JSON.stringify(pkg("core"))};`,
      ].join("\n"),
      resolveDir: refDir,
      loader: "ts",
    },
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    alias: { "@sharedos/contracts": pkg("contracts"), "@sharedos/core": pkg("core") },
    external: ["@sharedos/runtime"], // imported for a type only; esbuild drops it
    nodePaths: [join(refDir, "node_modules")],
    outfile: out,
    logLevel: "silent",
  });
} catch (error) {
  const why = error.errors?.[0]?.text ?? String(error.message).split("\n")[0];
  console.error(`host.mjs: cannot build the reference from ${refDir}/packages: ${why}`);
  process.exit(2);
}
await esbuild.stop?.(); // its service process would otherwise live beside the server
const ref = await import(pathToFileURL(out).href);

const agent = { kind: "agent", agentId: "bench" };
const alice = { kind: "human", userId: "alice" };
const grant = (id, path, actions) => ({
  id,
  namespaceId: "bench",
  subject: agent,
  issuer: alice,
  capabilities: [{ resource: { namespace: "files", path }, actions, scope: "descendants" }],
  constraints: {},
  issuedAt: "2026-01-01T00:00:00Z",
});
const grants = [];
for (let i = 1; i < count; i++) grants.push(grant(`g-${i}`, [`d${i}`], ["read", "list"]));
grants.push(grant("g-notes", ["notes"], ["read", "list", "stat"]));

const tokenHash = createHash("sha256").update(process.env.REF_TOKEN ?? "bench").digest();
const kernel = new ref.SharedOSKernel();
const handler = ref.createSharedOSHandler({
  api: ref.createKernelSharedOSApi({
    kernel,
    turns: {
      execute() {
        throw new Error("this host serves no turns");
      },
    },
  }),
  async resolveContext(request) {
    const header = request.headers.get("authorization") ?? "";
    const presented = createHash("sha256")
      .update(header.startsWith("Bearer ") ? header.slice(7) : "")
      .digest();
    if (!timingSafeEqual(presented, tokenHash)) {
      throw new ref.SharedOSHttpError(401, "unauthenticated", "A valid bearer token is required.");
    }
    return {
      namespaceId: "bench",
      actor: agent,
      authority: alice,
      owner: alice,
      purpose: "bench",
      traceId: randomUUID(),
      grants,
      now: new Date().toISOString(),
    };
  },
});

const server = createServer(nodeServer.getRequestListener(handler));
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
