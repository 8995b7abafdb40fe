#!/usr/bin/env python3
"""What leakcheck's forced full collections cost (docs/tools.md, "Snapshots").

For each program, on the default heap (whose young generation, a third of
1 GiB, lets these programs run without a collection of their own), runs
ROUNDS times, interleaved round by round so that machine drift hits all
alike:
  never    -agentlib:leakcheck=gc_every=1024g   (leakcheck, no forced collection)
  auto     -agentlib:leakcheck                  (the default schedule)
and prints the median CPU time (user + sys of the child) of each, their
ratio, and the median count of forced collections and of their pauses as
leakcheck reports them (milliseconds and share of the wall-clock time).

  benchmarks/leakcheck_cost.py --minivm build/bin/minivm [--rounds 5]
"""
import argparse
import os
import re
import statistics
import sys

from benchlib import run_once

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAMS = [
    ("leaky_cache.mv", ["examples/programs/leaky_cache.mv"]),
    ("binary_trees.mv 14", ["examples/programs/binary_trees.mv", "14"]),
    ("steady.mv", ["tests/tools/steady.mv"]),
    ("worker_pool.mv 4 4000", ["examples/programs/worker_pool.mv", "4", "4000"]),
    ("alloc_loop.mv", ["benchmarks/programs/alloc_loop.mv"]),
    ("word_count.mv 2000", ["examples/programs/word_count.mv", "2000"]),
]
FORCED = re.compile(r"(\d+) full collections? forced by leakcheck \(([\d.]+) ms, ([\d.]+)% of")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    minivm = os.path.abspath(a.minivm)
    print(f"leakcheck's forced collections, default heap, medians of {a.rounds} rounds "
          "(CPU seconds, user+sys)")
    print(f"{'program':24s} {'never':>7s} {'auto':>7s} {'ratio':>6s} {'forced':>6s} "
          f"{'pauses':>9s} {'share':>6s}")
    for label, prog in PROGRAMS:
        cpu = {"never": [], "auto": []}
        forced = []
        for _ in range(a.rounds):
            for name, opts in (("never", "=gc_every=1024g"), ("auto", "")):
                t, err = run_once([minivm, f"-agentlib:leakcheck{opts}", *prog], ROOT)
                cpu[name].append(t)
                m = FORCED.search(err)
                if name == "auto" and m:
                    forced.append((int(m.group(1)), float(m.group(2)), float(m.group(3))))
        never, auto = statistics.median(cpu["never"]), statistics.median(cpu["auto"])
        n, ms, share = ((statistics.median(f[i] for f in forced) for i in range(3)) if forced
                        else (0, 0.0, 0.0))
        print(f"{label:24s} {never:7.3f} {auto:7.3f} {auto / never:6.3f} {n:6.0f} "
              f"{ms:7.1f}ms {share:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
