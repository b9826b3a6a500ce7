#!/usr/bin/env python3
"""bench/serve-start.py — `sharedos serve` start-up and memory (issue 22, Speed):
the time from exec until GET /readyz answers 200 (polled every 2 ms, median of N runs)
and the server's CPU time by then,
and the server's RSS (VmRSS, and VmHWM, its peak) once 64 keep-alive connections are
open, each having made one authorized GET /v1/tools, under a 1,000-grant authority.
Prints the load average before and after. Needs the files bench/serve.sh builds:
run that first (or pass --out DIR of its output).

    bench/serve-start.py [--runs 10] [--out bench/out-serve]
"""
import argparse, http.client, os, socket, statistics, subprocess, time

ap = argparse.ArgumentParser()
ap.add_argument("--runs", type=int, default=10)
ap.add_argument("--out", default="bench/out-serve")
a = ap.parse_args()
out = a.out
env = dict(os.environ, HOME=f"{out}/home", XDG_CONFIG_HOME=f"{out}/xdg/config", XDG_STATE_HOME=f"{out}/xdg/state")
token = open(f"{out}/token").read().strip()


def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def start(p):
    t0 = time.perf_counter()
    proc = subprocess.Popen([f"{out}/sharedos", "--root", f"{out}/root", "--state", f"{out}/state/state.db", "serve",
                             "--listen", f"127.0.0.1:{p}", "--tokens", f"{out}/etc/tokens.yaml"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", p, timeout=1)
            c.request("GET", "/readyz"); r = c.getresponse(); r.read(); c.close()
            if r.status == 200:
                t = time.perf_counter() - t0
                f = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
                cpus.append((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))  # utime + stime
                return proc, t
        except OSError:
            pass
        time.sleep(0.002)


def status(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024


print("load average before:", " ".join(open("/proc/loadavg").read().split()[:3]))
times, cpus = [], []
for _ in range(a.runs):
    proc, t = start(port()); times.append(t); proc.terminate(); proc.wait()
p = port()
proc, _ = start(p)
conns = []
for _ in range(64):
    c = http.client.HTTPConnection("127.0.0.1", p)
    c.request("GET", "/v1/tools", headers={"Authorization": "Bearer " + token}); r = c.getresponse(); r.read()
    assert r.status == 200, r.status
    conns.append(c)
rss, hwm = status(proc.pid, "VmRSS"), status(proc.pid, "VmHWM")
for c in conns:
    c.close()
proc.terminate(); proc.wait()
print(f"ready from exec: median {statistics.median(times)*1000:.0f} ms, min {min(times)*1000:.0f} ms, max {max(times)*1000:.0f} ms ({a.runs} runs)")
print(f"CPU time (user + system) of serve until ready: median {statistics.median(cpus)*1000:.0f} ms (steadier than the wall clock under load)")
print(f"RSS with 1,000 grants and 64 open connections: {rss:.1f} MiB (peak {hwm:.1f} MiB)")
print("load average after:", " ".join(open("/proc/loadavg").read().split()[:3]))
