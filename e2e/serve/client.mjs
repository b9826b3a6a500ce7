// The /v1 API of `sharedos serve` driven by openapi-fetch, with the types openapi-typescript
// generated from api/openapi.yaml (schema.d.ts beside this file: its generation is the proof
// that a third-party generator reads the document). Asserts, for an agent token and an operator
// token: list, allowed call, denied call (a 200 result), explain, idempotent replay, 401, 403, 413.
import createClient from "openapi-fetch";
import assert from "node:assert/strict";

const [base, agentToken, operatorToken] = process.argv.slice(2);
const agent = createClient({ baseUrl: base, headers: { authorization: `Bearer ${agentToken}` } });
const operator = createClient({ baseUrl: base, headers: { authorization: `Bearer ${operatorToken}` } });
const call = (id, tool, args) => ({ id, tool, arguments: args, traceId: "trace-e2e", requestedAt: new Date().toISOString() });

// list
let r = await agent.GET("/v1/tools");
assert.equal(r.response.status, 200);
assert.ok(r.data.some((t) => t.name === "files.read"), "files.read is listed");
assert.equal(r.response.headers.get("cache-control"), "no-store");
assert.ok(r.response.headers.get("x-request-id"));

// allowed call
r = await agent.POST("/v1/tools/invoke", { body: call("c1", "files.read", { path: ["notes", "todo.md"] }) });
assert.equal(r.response.status, 200);
assert.equal(r.data.status, "succeeded");
assert.equal(r.data.output.content, "buy milk\n");

// denied call: a 200 result, never an HTTP error
r = await agent.POST("/v1/tools/invoke", { body: call("c2", "files.delete", { path: ["notes", "todo.md"] }) });
assert.equal(r.response.status, 200);
assert.equal(r.data.status, "denied");
assert.equal(r.data.error.code, "tool_unavailable");

// explain
r = await agent.POST("/v1/tools/explain", { body: call("c3", "files.delete", { path: ["notes", "todo.md"] }) });
assert.equal(r.response.status, 200);
assert.equal(r.data.allowed, false);
assert.ok(r.data.fixes.length > 0);
r = await agent.POST("/v1/authorize", { params: { query: { explain: "true" } }, body: { resource: { namespace: "files", path: ["notes"] }, action: "delete" } });
assert.equal(r.data.refusal.code, "no_matching_grant");

// idempotent replay: the same body, verbatim
const created = call("c4", "files.create", { path: ["drafts", "e2e.md"], content: "once" });
const a = await agent.POST("/v1/tools/invoke", { body: created, params: { header: { "Idempotency-Key": "e2e-key" } }, parseAs: "text" });
const b = await agent.POST("/v1/tools/invoke", { body: created, params: { header: { "Idempotency-Key": "e2e-key" } }, parseAs: "text" });
assert.equal(a.response.status, 200);
assert.equal(b.data, a.data);
assert.equal(b.response.headers.get("idempotency-replayed"), "true");
const c = await agent.POST("/v1/tools/invoke", { body: call("c5", "files.create", { path: ["drafts", "other.md"], content: "x" }), params: { header: { "Idempotency-Key": "e2e-key" } } });
assert.equal(c.response.status, 409);
assert.equal(c.error.error.code, "replay_conflict");

// 401
const nobody = createClient({ baseUrl: base });
r = await nobody.GET("/v1/tools");
assert.equal(r.response.status, 401);
assert.equal(r.error.error.code, "unauthorized");

// 403: an operator route with an agent token; the operator token passes
r = await agent.GET("/v1/admin/audit", { params: { query: { type: "tool.invoked" } } });
assert.equal(r.response.status, 403);
assert.equal(r.error.error.code, "permission_denied");
r = await operator.GET("/v1/admin/audit", { params: { query: { type: "tool.invoked" } } });
assert.equal(r.response.status, 200);
assert.equal(r.data.filter((e) => e.operationId === "c4").length, 1, "the replayed call ran once");

// 413
r = await agent.POST("/v1/tools/invoke", { body: call("c6", "files.read", { path: ["notes", "todo.md"], pad: "x".repeat(5 << 20) }) });
assert.equal(r.response.status, 413);
assert.equal(r.error.error.code, "payload_too_large");
console.log("serve e2e (openapi-fetch): list, allowed, denied, explain, idempotent replay, 401, 403, 413: ok");
