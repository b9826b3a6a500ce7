#!/usr/bin/env python3
"""messages.request round trip broken into its parts (issue 24; bench/messages.sh).

    bench/messages-parts.py BIN [BASE_BIN]

Run from bench/messages.sh's environment (SHAREDOS_CONFIG, SHAREDOS_STATE,
SHAREDOS_GRANTS of the requester agent:writer; the configuration's exec recipient
agent:echo and wait recipient agent:inbox; INBOX_GRANTS, agent:inbox's grant file).

1. Parts of a round trip from a running `sharedos mcp` session: the session runs under
   `strace -f --seccomp-bpf` tracing execve, exit_group and fsync only (the other system
   calls run untraced), RUNS calls of messages.request to agent:echo, each split at the
   recipient's execve (its shell), the shell's execve of sharedos, and that process's
   exit_group:
     caller before exec   request read .. the recipient's command started (authorize,
                          spend, deliver in the caller; the fork/exec)
     shell                the command's shell until it execs `sharedos messages reply`
     reply process        `sharedos messages reply` from execve to exit_group (its start,
                          configuration, grants, store, authorization, one transaction)
     exit to answer       the reply process's exit .. the answer read by the client (the
                          waiter woken, the reply read, validated, audited, written out)
   with the fsyncs each part did. strace slows every traced call and the process starts a
   little: the parts are for proportions; the untraced round trip is messages-mcp.py's row.
2. The reply process alone beside `sharedos version`: RUNS pending requests to the wait
   recipient agent:inbox (sent untimed), then `sharedos messages reply ID` as agent:inbox
   (its own grants) interleaved with `sharedos version`, while an idle `sharedos mcp`
   session holds the database open as the requester's does in a round trip; p50/p95 wall, CPU and minor page
   faults (wait4's rusage: load-insensitive) of each, and the reply's ratio to version.
   With BASE_BIN, the same two rows of that build too, in the same interleaved rounds
   (A/B under the same load).
"""
import json, os, statistics, subprocess, sys, tempfile, time

runs = int(os.environ.get("RUNS", "30"))
warmup = int(os.environ.get("WARMUP", "3"))
bins = sys.argv[1:]
if not bins:
    sys.exit("usage: messages-parts.py BIN [BASE_BIN]")
call_args = json.loads(os.environ.get("CALL_ARGS", '{"recipient":{"kind":"agent","agentId":"echo"},"payload":{"n":1}}'))


def p50(xs):
    return statistics.median(xs)


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


# ---- 1. the parts of a round trip from a running session ----
def parts(bin_path, label):
    trace = tempfile.NamedTemporaryFile(prefix="messages-parts-", suffix=".strace", delete=False).name
    p = subprocess.Popen(["strace", "-f", "--seccomp-bpf", "-ttt", "-qq", "-e", "signal=none",
                          "-e", "trace=execve,exit_group,fsync,fdatasync", "-o", trace, bin_path, "mcp"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def call(rid, method, params):
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode())
        p.stdin.flush()
        want = f'"id":{rid}'.encode()
        for line in p.stdout:
            if want in line:
                return json.loads(line)
        sys.exit(f"{bin_path}: the session ended before answering {method}")

    call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n").encode())
    p.stdin.flush()
    trips = []
    for i in range(warmup + runs):
        t0 = time.time()
        r = call(100 + i, "tools/call", {"name": "messages.request", "arguments": call_args})
        t1 = time.time()
        if (r.get("result") or {}).get("isError") or "error" in r:
            sys.exit(f"messages.request failed: {json.dumps(r)[:400]}")
        if i >= warmup:
            trips.append((t0, t1))
    p.stdin.close()
    p.wait()
    events = []  # (time, pid, kind)
    for line in open(trace):
        f = line.split(None, 2)
        if len(f) < 3 or not f[0].isdigit():
            continue
        pid, t, rest = int(f[0]), float(f[1]), f[2]
        if rest.startswith("execve(") and "= 0" in rest:
            kind = "exec-sharedos" if '"messages", "reply"' in rest else "exec"
        elif rest.startswith("exit_group("):
            kind = "exit"
        elif rest.startswith(("fsync(", "fdatasync(")):
            kind = "fsync"
        else:
            continue
        events.append((t, pid, kind))
    os.unlink(trace)
    events.sort()
    names = ["caller before exec", "shell", "reply process", "exit to answer"]
    cols = {n: [] for n in names}
    syncs = {n: [] for n in names}
    for t0, t1 in trips:
        ev = [e for e in events if t0 <= e[0] <= t1]
        sos = [e for e in ev if e[2] == "exec-sharedos"]
        if not sos:
            continue
        pid = sos[0][1]  # the shell's pid: it execs sharedos
        sh = [e for e in ev if e[2] == "exec" and e[1] == pid]
        # strace names the thread that calls exit_group: the first one after the exec
        ex = [e for e in ev if e[2] == "exit" and e[0] > sos[0][0]]
        if not sh or not ex:
            continue
        cuts = [t0, sh[0][0], sos[0][0], ex[0][0], t1]
        for j, n in enumerate(names):
            cols[n].append(cuts[j + 1] - cuts[j])
            syncs[n].append(sum(1 for e in ev if e[2] == "fsync" and cuts[j] <= e[0] < cuts[j + 1]))
    if not cols[names[0]]:
        sys.exit("no round trip could be split (is strace installed?)")
    whole = [sum(cols[n][k] for n in names) for k in range(len(cols[names[0]]))]
    print(f"round trip parts ({label}, from a running sharedos mcp session under strace, {len(whole)} trips): "
          f"whole p50 {p50(whole) * 1000:.1f} ms")
    for n in names:
        share = p50(cols[n]) / p50(whole) if p50(whole) else 0
        print(f"  {n:<19} p50 {p50(cols[n]) * 1000:6.1f} ms ({share:4.0%} of the whole's p50; medians need not add up), fsyncs {p50(syncs[n]):.0f}")


# ---- 2. the reply process alone beside sharedos version ----
def run(argv, env):
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} exited with {os.waitstatus_to_exitcode(status)}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_minflt


def pending(bin_path, n):
    ids = []
    for _ in range(n):
        out = subprocess.run([bin_path, "messages", "send", "--to", "agent:inbox", "--payload", '{"n":1}', "-o", "json"],
                             check=True, capture_output=True).stdout
        ids.append(json.loads(out)["envelope"]["id"])
    return ids


def alone():
    inbox_env = dict(os.environ, SHAREDOS_GRANTS=os.environ["INBOX_GRANTS"], SHAREDOS_AS="agent:inbox")
    ids = {b: pending(b, warmup + runs) for b in bins}
    # an idle `sharedos mcp` session keeps the state database open, as the requester's
    # session does in a round trip: otherwise each reply process is the file's last
    # connection and checkpoints it when it closes (two more fsyncs), and the next one
    # restarts the write-ahead log (one more) — costs no round trip has
    holder = subprocess.Popen([bins[0], "mcp"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)  # its start-up opens the database (not timed: only a holder)
    cases = []
    for b in bins:
        tag = "" if b == bins[0] else " (base build)"
        cases.append((f"sharedos version{tag}", b, [b, "version", "-o", "json"], os.environ))
        cases.append((f"messages reply, alone{tag}", b, None, inbox_env))
    samples = {c[0]: [] for c in cases}
    for r in range(warmup + runs):
        order = cases[r % len(cases):] + cases[:r % len(cases)]
        for name, b, argv, env in order:
            a = argv if argv else [b, "messages", "reply", ids[b][r], "--payload", '{"ok":true}', "-o", "json"]
            s = run(a, env)
            if r >= warmup:
                samples[name].append(s)
    holder.stdin.close()
    holder.wait()
    print(f"reply process alone beside sharedos version ({runs} interleaved rounds, the database held open by an idle mcp session):")
    for name, _, _, _ in cases:
        w = [s[0] for s in samples[name]]
        c = [s[1] for s in samples[name]]
        f = [s[2] for s in samples[name]]
        print(f"  {name:<34} wall p50 {p50(w) * 1000:6.1f} ms, p95 {p95(w) * 1000:6.1f} ms, "
              f"CPU {p50(c) * 1000:5.1f} ms, page faults {p50(f):.0f}")
    for b in bins:
        tag = "" if b == bins[0] else " (base build)"
        v = p50([s[0] for s in samples[f"sharedos version{tag}"]])
        rp = p50([s[0] for s in samples[f"messages reply, alone{tag}"]])
        vc = p50([s[1] for s in samples[f"sharedos version{tag}"]])
        rc = p50([s[1] for s in samples[f"messages reply, alone{tag}"]])
        print(f"  ratio reply/version{tag}: wall {rp / v:.2f}x, CPU {rc / vc:.2f}x; reply above version: {(rp - v) * 1000:.1f} ms")
    if len(bins) > 1:
        new = p50([s[1] for s in samples["messages reply, alone"]])
        old = p50([s[1] for s in samples["messages reply, alone (base build)"]])
        print(f"  reply CPU, this build / base build: {new / old:.2f}x")


print(f"load average: {load()}", flush=True)
for b in bins:
    parts(b, "this build" if b == bins[0] else "base build")
alone()
print(f"load average: {load()}")
