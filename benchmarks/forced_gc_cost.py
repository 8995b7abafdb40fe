#!/usr/bin/env python3
"""What heapprof's "live means live" costs: the full collection it forces
before the final profile and before every numbered dump (gc=1, the
default), against gc=0, in one interleaved run.

For each configuration it runs the program ROUNDS times, interleaved, and
reports the median CPU time (user + sys of the child), the number of forced
collections (`[gc] full (explicit)` lines of --verbose:gc) and their median
pause and heap before -> after, which is the cost per profile or dump.

  benchmarks/forced_gc_cost.py --minivm build/bin/minivm [--agents-dir build/bin]
      [--rounds 5] [--program examples/programs/leaky_cache.mv] [--args 200000]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

from benchlib import run_once

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXPLICIT = re.compile(r"\[gc\] full \(explicit\) ([\d.]+[KMG]?)->([\d.]+[KMG]?) \(.*?\) ([\d.]+)ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm", required=True)
    ap.add_argument("--agents-dir")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--program", default=os.path.join(ROOT, "examples/programs/leaky_cache.mv"))
    ap.add_argument("--args", default="200000")
    a = ap.parse_args()
    minivm = os.path.abspath(a.minivm)
    lib = os.path.join(os.path.abspath(a.agents_dir or os.path.dirname(minivm)), "libheapprof.so")
    out = tempfile.mkdtemp(prefix="forced_gc_")
    heap = os.path.join(out, "heap.pb.gz")
    configs = [
        ("no agent", []),
        ("final, gc=0", [f"-agentpath:{lib}=file={heap},gc=0,top=0"]),
        ("final, gc=1", [f"-agentpath:{lib}=file={heap},gc=1,top=0"]),
        ("dump_every=16m, gc=0", [f"-agentpath:{lib}=file={heap},gc=0,top=0,dump_every=16m"]),
        ("dump_every=16m, gc=1", [f"-agentpath:{lib}=file={heap},gc=1,top=0,dump_every=16m"]),
    ]
    cpu = {name: [] for name, _ in configs}
    pauses = {name: [] for name, _ in configs}
    for _ in range(a.rounds):
        for name, agent in configs:
            t, err = run_once([minivm, "--verbose:gc", *agent, a.program, *a.args.split()], out)
            gcs = EXPLICIT.findall(err)
            cpu[name].append(t)
            pauses[name].append(gcs)
    print(f"heapprof forced collections: {os.path.basename(a.program)} {a.args}, "
          f"{a.rounds} interleaved rounds, median CPU seconds (user+sys)")
    base = statistics.median(cpu["no agent"])
    print(f"{'configuration':24} {'cpu s':>7} {'ratio':>7} {'forced':>7} {'pause ms':>9}  heap")
    for name, _ in configs:
        med = statistics.median(cpu[name])
        last = pauses[name][-1]
        ms = [float(p[2]) for run in pauses[name] for p in run]
        heap_txt = f"{last[-1][0]}->{last[-1][1]}" if last else "-"
        print(f"{name:24} {med:7.3f} {med / base:7.3f} {len(last):7d} "
              f"{(statistics.median(ms) if ms else 0):9.1f}  {heap_txt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
