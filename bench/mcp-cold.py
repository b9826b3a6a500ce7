#!/usr/bin/env python3
"""Cold start of an MCP server over stdio with a minimal raw client (bench/mcp.sh): the
time from spawning `CMD ARGS...` to the answer of its first tools/list (initialize,
notifications/initialized and tools/list written at once; no schema compiled, nothing
validated), median of N runs (default 20); then, in one more session, the round trip of
tools/list after the first (p50 of 200). Prints two lines (three with CALL_TOOL)."""
import json, os, subprocess, sys, time

cmd = sys.argv[1:]
msgs = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
]
payload = ("\n".join(json.dumps(m) for m in msgs) + "\n").encode()
times = []
for _ in range(int(os.environ.get("N", "20"))):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(payload)
    p.stdin.flush()
    ok = False
    for line in p.stdout:
        if b'"id":2' in line:
            ok = b'"tools"' in line
            break
    times.append(time.perf_counter() - t0)
    p.stdin.close()
    p.wait()
    if not ok:
        sys.exit(f"{cmd[0]}: no tools/list answer")
times.sort()
name = os.environ.get("NAME", os.path.basename(cmd[0]))
print(f"{name}: cold start to the first tools/list answer (raw client) "
      f"median {times[len(times) // 2] * 1000:.1f} ms, min {times[0] * 1000:.1f} ms ({len(times)} runs)")


def open_session():
    """A started server that has answered its first tools/list."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(payload)
    p.stdin.flush()
    for line in p.stdout:
        if b'"id":2' in line:
            break
    return p


p = open_session()
lists = []
for i in range(200):
    req = (json.dumps({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/list", "params": {}}) + "\n").encode()
    t0 = time.perf_counter()
    p.stdin.write(req)
    p.stdin.flush()
    want = f'"id":{100 + i}'.encode()
    for line in p.stdout:
        if want in line:
            break
    lists.append(time.perf_counter() - t0)
p.stdin.close()
p.wait()
lists.sort()
print(f"{name}: tools/list after the first (raw client) p50 {lists[len(lists) // 2] * 1e6:.0f} µs, "
      f"p99 {lists[int(len(lists) * 0.99)] * 1e6:.0f} µs")

# With CALL_TOOL (and CALL_ARGS, a JSON object) set: one more session, the round trip of
# tools/call after the first (p50 and p99 of CALLS, default 1000), with no client-side
# schema work — the server's own cost plus a pipe round trip.
tool = os.environ.get("CALL_TOOL")
if tool:
    call_args = json.loads(os.environ.get("CALL_ARGS", "{}"))
    p = open_session()
    calls, failed = [], 0
    for i in range(int(os.environ.get("CALLS", "1000")) + 1):
        req = (json.dumps({"jsonrpc": "2.0", "id": 10000 + i, "method": "tools/call",
                           "params": {"name": tool, "arguments": call_args}}) + "\n").encode()
        t0 = time.perf_counter()
        p.stdin.write(req)
        p.stdin.flush()
        want = f'"id":{10000 + i}'.encode()
        for line in p.stdout:
            if want in line:
                if b'"isError":true' in line:
                    failed += 1
                break
        if i > 0:
            calls.append(time.perf_counter() - t0)
    p.stdin.close()
    p.wait()
    if failed:
        sys.exit(f"{name}: {failed} calls of {tool} were refused or failed")
    calls.sort()
    print(f"{name}: tools/call {tool} after the first (raw client) p50 {calls[len(calls) // 2] * 1e6:.0f} µs, "
          f"p99 {calls[int(len(calls) * 0.99)] * 1e6:.0f} µs ({len(calls)} calls)")
