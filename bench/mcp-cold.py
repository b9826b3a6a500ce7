#!/usr/bin/env python3
"""Cold start of an MCP server over stdio with a minimal raw client (bench/mcp.sh): the
time from spawning `CMD ARGS...` to the answer of its first tools/list (initialize,
notifications/initialized and tools/list written at once; no schema compiled, nothing
validated), median of N runs (default 20). Prints one line."""
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
print(f"{os.environ.get('NAME', os.path.basename(cmd[0]))}: cold start to the first tools/list answer (raw client) "
      f"median {times[len(times) // 2] * 1000:.1f} ms, min {times[0] * 1000:.1f} ms ({len(times)} runs)")
