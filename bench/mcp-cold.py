#!/usr/bin/env python3
"""Cold start of an MCP server over stdio with a minimal raw client (bench/mcp.sh): the
time from spawning `CMD ARGS...` to the answer of its first tools/list (initialize,
notifications/initialized and tools/list written at once; no schema compiled, nothing
validated), median of N runs (default 20); then, in one more session, the round trip of
tools/list after the first (p50 of 200). Prints two lines."""
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

p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
p.stdin.write(payload)
p.stdin.flush()
for line in p.stdout:
    if b'"id":2' in line:
        break
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
