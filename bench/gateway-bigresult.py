#!/usr/bin/env python3
"""Peak memory of `sharedos mcp` under a huge upstream answer (issue 20, item 5).

Runs `sharedos mcp` with one gated stdio upstream: this same script in --upstream mode,
a raw MCP server that answers one tool, `giant`, with a result of SIZE bytes streamed in
64 KiB chunks (so the upstream itself stays small). A raw client initializes sharedos,
calls db.giant, checks the call failed invalid_tool_result, and reads the server's peak
resident memory (VmHWM of /proc/PID/status) before closing it, then prints it.

    python3 bench/gateway-bigresult.py SHAREDOS_BINARY [SIZE_MB]   # default 1024 MB
"""
import json, os, subprocess, sys, tempfile

def upstream(size):
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        mid, method = msg.get("id"), msg.get("method")
        if mid is None:
            continue
        if method == "initialize":
            res = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                   "serverInfo": {"name": "giant", "version": "1"}}
        elif method == "tools/list":
            res = {"tools": [{"name": "giant", "description": "A huge answer.", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            head = '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' % json.dumps(mid)
            out.write(head.encode())
            chunk = b"y" * (64 << 10)
            try:
                for _ in range(size // len(chunk)):
                    out.write(chunk)
                out.write(b'"}]}}\n')
                out.flush()
            except BrokenPipeError:
                return
            continue
        else:
            res = {}
        out.write((json.dumps({"jsonrpc": "2.0", "id": mid, "result": res}) + "\n").encode())
        out.flush()

def main():
    if sys.argv[1] == "--upstream":
        upstream(int(sys.argv[2]))
        return
    exe = os.path.abspath(sys.argv[1])
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    d = tempfile.mkdtemp()
    os.mkdir(os.path.join(d, "root"))
    with open(os.path.join(d, "config.yaml"), "w") as f:
        f.write(f"""defaultNamespaces: [db]
mcpServers:
  - id: db
    command: [{json.dumps(sys.executable)}, {json.dumps(os.path.abspath(__file__))}, --upstream, "{size << 20}"]
    callTimeout: 10m
    unmapped: gate
""")
    with open(os.path.join(d, "grants.yaml"), "w") as f:
        f.write("""version: 1
context: {actor: "agent:bench", owner: "human:op"}
grants:
  - id: g
    subject: agent:bench
    issuer: human:op
    issuedAt: 2026-01-01T00:00:00Z
    capabilities:
      - resource: {namespace: db, path: [], owner: human:op}
        actions: [call]
        scope: descendants
    constraints: {expiresAt: 2099-01-01T00:00:00Z}
""")
    p = subprocess.Popen([exe, "--config", os.path.join(d, "config.yaml"), "--root", os.path.join(d, "root"),
                          "--state", os.path.join(d, "state.db"), "--grants", os.path.join(d, "grants.yaml"), "mcp"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    def rpc(mid, method, params):
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": mid, "method": method, "params": params}) + "\n").encode())
        p.stdin.flush()
        while True:
            msg = json.loads(p.stdout.readline())
            if msg.get("id") == mid:
                return msg
    rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    p.stdin.flush()
    r = rpc(2, "tools/call", {"name": "db.giant", "arguments": {}})
    res = r.get("result", {})
    code = (res.get("_meta") or {}).get("sharedos/code") or json.dumps(res)[:300]
    with open(f"/proc/{p.pid}/status") as f:
        hwm = [l for l in f if l.startswith("VmHWM")][0].split()[1]
    p.stdin.close()
    p.wait()
    print(f"upstream answer {size} MB: sharedos mcp peak RSS {int(hwm) / 1024:.1f} MiB; result: {code}")

main()
