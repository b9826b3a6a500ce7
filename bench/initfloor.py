#!/usr/bin/env python3
"""What the per-process floor is made of (issue 28): runs `BIN version -o json` RUNS times
with GODEBUG=inittrace=1 and prints, per package init, the fastest clock seen (the least
disturbed by other processes), its bytes and allocations; then the totals (packages
initialised, sum of the fastest clocks, bytes, allocations) and the TOP heaviest inits,
each with the module that owns it. Every package a binary links is initialised in every
command (Go has no lazy package init): this is the part of `version` that only linking
fewer or lighter packages removes.

    bench/initfloor.py BIN [RUNS] [TOP]      # defaults: 15 runs, top 25
    bench/initfloor.py bench/out/sharedos
"""
import collections
import os
import re
import subprocess
import sys

LINE = re.compile(r"init (\S+) @\S+ ms, ([\d.]+) ms clock, (\d+) bytes, (\d+) allocs")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    fastest = collections.defaultdict(lambda: float("inf"))
    mem = {}
    env = dict(os.environ, GODEBUG="inittrace=1")
    for _ in range(runs):
        err = subprocess.run([binary, "version", "-o", "json"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, check=True).stderr
        for m in LINE.finditer(err):
            pkg = m.group(1).replace("%2e", ".")
            fastest[pkg] = min(fastest[pkg], float(m.group(2)))
            mem[pkg] = (int(m.group(3)), int(m.group(4)))
    if not fastest:
        sys.exit(f"{binary}: no inittrace lines (not a Go binary?)")
    total_ms = sum(fastest.values())
    total_b = sum(b for b, _ in mem.values())
    total_a = sum(a for _, a in mem.values())
    print(f"package inits of `{os.path.basename(binary)} version` ({runs} runs, fastest clock of each; load "
          f"{os.getloadavg()[0]:.1f}): {len(fastest)} packages, {total_ms:.2f} ms, "
          f"{total_b / 1024:.0f} KiB in {total_a} allocations")

    def module(pkg):
        parts = pkg.split("/")
        if "." not in parts[0]:
            return "std"
        return "/".join(parts[:3]) if parts[0] in ("github.com", "golang.org", "go.opentelemetry.io") else parts[0]

    by_module = collections.defaultdict(lambda: [0.0, 0, 0, 0])
    for pkg, ms in fastest.items():
        m = by_module[module(pkg)]
        m[0] += ms
        m[1] += mem[pkg][0]
        m[2] += mem[pkg][1]
        m[3] += 1
    print(f"  heaviest {top} inits (by clock, then bytes):")
    for pkg in sorted(fastest, key=lambda p: (-fastest[p], -mem[p][0]))[:top]:
        print(f"    {fastest[pkg]:6.3f} ms {mem[pkg][0]:7d} B {mem[pkg][1]:5d} allocs  {pkg}")
    print("  by module (clock, bytes, allocations, packages):")
    for mod, (ms, b, a, n) in sorted(by_module.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"    {ms:6.3f} ms {b:7d} B {a:5d} allocs {n:4d} pkgs  {mod}")


if __name__ == "__main__":
    main()
