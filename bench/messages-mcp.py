#!/usr/bin/env python3
"""messages.request round trip from a running host (bench/messages.sh): one `sharedos mcp`
stdio session (CMD ARGS..., the agent's usual setting) is started and initialized once;
then RUNS tools/call messages.request calls (arguments: CALL_ARGS, a JSON object) are
sent one after the other, each timed from the request written to its answer read — so
a trip holds the recipient's turn (its `sharedos messages reply` process start) but not
the requester's. The first WARMUP calls are not counted. Prints one row: p50 and p95
wall time, and the CPU time per call of the session and the processes it waited for
(/proc/<pid>/stat utime+stime+cutime+cstime, before and after)."""
import json, os, statistics, subprocess, sys, time

cmd = sys.argv[1:]
runs = int(os.environ.get("RUNS", "30"))
warmup = int(os.environ.get("WARMUP", "3"))
name = os.environ.get("NAME", "messages.request round trip from a running sharedos mcp session")
call_args = json.loads(os.environ["CALL_ARGS"])
tick = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    """The CPU seconds of pid and of its children it waited for."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime


p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def call(rid, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode())
    p.stdin.flush()
    want = f'"id":{rid}'.encode()
    for line in p.stdout:
        if want in line:
            return json.loads(line)
    sys.exit(f"{cmd[0]}: the session ended before answering {method}")


call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
p.stdin.write((json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n").encode())
p.stdin.flush()
walls = []
cpu0 = None
for i in range(warmup + runs):
    if i == warmup:
        cpu0 = cpu(p.pid)
    t0 = time.perf_counter()
    r = call(100 + i, "tools/call", {"name": "messages.request", "arguments": call_args})
    dt = time.perf_counter() - t0
    res = r.get("result") or {}
    if res.get("isError") or "error" in r:
        sys.exit(f"messages.request failed: {json.dumps(r)[:400]}")
    if i >= warmup:
        walls.append(dt)
cpu1 = cpu(p.pid)
p.stdin.close()
p.wait()
walls.sort()
p95 = walls[min(len(walls) - 1, int(round(0.95 * (len(walls) - 1))))]
print(f"{name}: wall p50 {statistics.median(walls) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
      f"CPU {(cpu1 - cpu0) / runs * 1000:.1f} ms per call (session + recipient processes), {runs} runs")
