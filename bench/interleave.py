#!/usr/bin/env python3
"""Interleaved process benchmark (issue 28): run every command once per round, in a
rotating order, for N rounds, so that a change in the machine's load hits every command
alike; report the median wall time and the median CPU time (user + system, from wait4)
of each, and each command's ratio to the peer (the first command named with --peer).

    bench/interleave.py [--runs N] [--warmup N] [--prepare CMD]... \
        --peer 'git --version' 'git --version' \
        --cmd 'version' './sharedos version' ...

A --prepare given before a --peer/--cmd runs (untimed, through sh) before each run of
that command. Prints one row per command and the load average before and after; with
--json FILE, also writes the raw samples.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time


def run_once(argv, prepare):
    if prepare:
        subprocess.run(prepare, shell=True, check=True, stdout=subprocess.DEVNULL)
    t0 = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ,
                          file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{shlex.join(argv)} exited with {os.waitstatus_to_exitcode(status)}")
    return wall, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", 30)))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json")
    cmds, peer, prepare = [], None, None
    rest = []
    argv = sys.argv[1:]
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--cmd", "--peer"):
            name, line = argv[i + 1], argv[i + 2]
            cmds.append({"name": name, "argv": shlex.split(line), "prepare": prepare, "peer": a == "--peer"})
            prepare = None
            i += 3
        elif a == "--prepare":
            prepare = argv[i + 1]
            i += 2
        else:
            rest.append(a)
            i += 1
    opts = ap.parse_args(rest)
    if not cmds:
        sys.exit("no --cmd given")
    peers = [c for c in cmds if c["peer"]]
    peer = peers[0] if peers else None
    load0 = open("/proc/loadavg").read().split()[:3]
    for c in cmds:
        for _ in range(opts.warmup):
            run_once(c["argv"], c["prepare"])
        c["wall"], c["cpu"] = [], []
    for r in range(opts.runs):
        k = r % len(cmds)
        for c in cmds[k:] + cmds[:k]:
            w, u = run_once(c["argv"], c["prepare"])
            c["wall"].append(w)
            c["cpu"].append(u)
    load1 = open("/proc/loadavg").read().split()[:3]
    print(f"load average {' '.join(load0)} before, {' '.join(load1)} after, on {os.cpu_count()} CPUs; "
          f"{opts.runs} interleaved rounds")
    width = max(len(c["name"]) for c in cmds)
    for c in cmds:
        w, u = statistics.median(c["wall"]), statistics.median(c["cpu"])
        row = f"{c['name']:<{width}}  wall p50 {w * 1000:7.2f} ms  cpu p50 {u * 1000:7.2f} ms"
        if peer is not None and c is not peer:
            pw, pu = statistics.median(peer["wall"]), statistics.median(peer["cpu"])
            row += f"  = {w / pw:5.2f}x wall, {u / pu:5.2f}x cpu of {peer['name']}"
        print(row, flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump([{k: c[k] for k in ("name", "wall", "cpu")} for c in cmds], f)


if __name__ == "__main__":
    main()
