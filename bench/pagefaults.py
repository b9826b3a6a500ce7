#!/usr/bin/env python3
"""Page faults of one process start, by kind (issue 28's process floor): runs each COMMAND
RUNS times under `perf record -e page-faults -c 1 -d` and classifies every fault by the
mapping its address falls in:

  file   the binary's text and read-only data (r-x, r--): a page-cache page mapped in,
         ~2 us each on this VM
  cow    the binary's .data (rw- file mapping): a private copy on first write
  anon   everything else (.bss, the Go heap, stacks, the runtime's own mmaps): a page
         the kernel must allocate and zero, ~16 us each on this VM (the lead's /tmp/pf.c)

and prints the median of each kind, the total and an estimate of the kernel time they
cost (file × 2 us + (cow + anon) × 16 us). Faults are counted, not timed: the figures
move little with the machine's load, which is what an A/B of a start-up change needs on
a busy machine (the wall-clock rows of bench/cli.sh say what a user waits). They still
vary by 2-3 % from start to start (how many threads the runtime starts depends on
scheduling): for a small difference take 21 runs or more, and run A and B twice.

    bench/pagefaults.py [--runs N] -- LABEL 'COMMAND ...' [LABEL 'COMMAND ...' ...]
    bench/pagefaults.py -- hello bench/out/hello/hello version 'bench/out/sharedos version -o json'

Needs perf (kernel.perf_event_paranoid low enough for page-fault events).
"""
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

MMAP = re.compile(r"PERF_RECORD_MMAP2? \d+/\d+: \[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ \S+(?: [0-9a-f]+:[0-9a-f]+ \d+ \d+)?\]: (\S+) (.*)$")
FAULT = re.compile(r"page-faults:\s+([0-9a-f]+)")


def classify(script, binary):
    maps = []  # (start, end, kind)
    counts = {"file": 0, "cow": 0, "anon": 0}
    for line in script.splitlines():
        m = MMAP.search(line)
        if m:
            start, size, prot, name = int(m.group(1), 16), int(m.group(2), 16), m.group(3), m.group(4).strip()
            if name == binary or name.endswith("/" + os.path.basename(binary)):
                kind = "cow" if prot.startswith("rw") else "file"
                maps.append((start, start + size, kind))
            continue
        f = FAULT.search(line)
        if not f:
            continue
        addr = int(f.group(1), 16)
        kind = "anon"
        for s, e, k in maps:
            if s <= addr < e:
                kind = k
                break
        counts[kind] += 1
    return counts


def measure(cmd, runs):
    argv = shlex.split(cmd)
    binary = os.path.realpath(subprocess.run(["sh", "-c", 'command -v "$1"', "-", argv[0]],
                                             capture_output=True, text=True).stdout.strip() or argv[0])
    rows = []
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        for _ in range(runs):
            subprocess.run(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o", data, "--"] + argv,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            out = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events", "-F", "event,addr"],
                                 capture_output=True, text=True).stdout
            # -F event,addr drops the mmap lines' detail: read them in full apart
            mm = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events"],
                                capture_output=True, text=True).stdout
            rows.append(classify("\n".join(l for l in mm.splitlines() if "PERF_RECORD_MMAP" in l) + "\n" + out, binary))
    med = {k: statistics.median(r[k] for r in rows) for k in ("file", "cow", "anon")}
    return med


def main():
    args = sys.argv[1:]
    runs = 7
    if args[:1] == ["--runs"]:
        runs, args = int(args[1]), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args or len(args) % 2:
        sys.exit(__doc__)
    print(f"page faults per start, median of {runs} runs (load {os.getloadavg()[0]:.1f}; counts, not times)")
    print(f"{'':44s} {'file':>6s} {'cow':>6s} {'anon':>6s} {'total':>6s}  est. kernel ms (file 2 us, cow/anon 16 us)")
    for label, cmd in zip(args[::2], args[1::2]):
        m = measure(cmd, runs)
        tot = m["file"] + m["cow"] + m["anon"]
        est = (m["file"] * 2 + (m["cow"] + m["anon"]) * 16) / 1000
        print(f"{label[:44]:44s} {m['file']:6.0f} {m['cow']:6.0f} {m['anon']:6.0f} {tot:6.0f}  {est:6.2f}")


if __name__ == "__main__":
    main()
