#!/usr/bin/env python3
"""What a VMTI heap walk costs per MiB of live heap (docs/performance.md,
"Heap walks").

Builds MIB mebibytes of 32-byte objects (benchmarks/programs/small_objects.mv)
and, at VM death, times with the heapwalk_bench agent: a FollowReferences
that follows everything without tags, an IterateThroughHeap, and the
tagging walk leakcheck's path search makes (every object reached gets a tag,
up to --budget objects) with the walk that clears the tags. Prints, per walk,
the pause the VM logs (--verbose:gc: `[gc] heap walk ...`), objects, and
milliseconds per MiB of live heap and nanoseconds per object. Then, with
--leakcheck, runs leakcheck on the same program (a leak: the chains only
grow) and prints its path-search line: the pause of a search bounded by its
budget on a heap that size.

  benchmarks/heap_walk_cost.py --minivm build/bin/minivm \\
      --agent build/benchmarks/agents/libheapwalk_bench.so [--mib 1024] [--budget 2000000] \\
      [--leakcheck build/bin/libleakcheck.so]
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "programs", "small_objects.mv")
WALK = re.compile(r"^\[gc\] heap walk \(from the roots\) (\d+) roots, (\d+) objects, (\d+) "
                  r"references(, aborted)? ([\d.]+)ms$", re.M)
BENCH = re.compile(r"^heapwalk_bench: (\w+) objects=(\d+) refs=(\d+) ms=([\d.]+)$", re.M)
PATHS = re.compile(r"^leakcheck:     paths to GC roots: .*$", re.M)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minivm", required=True)
    ap.add_argument("--agent", required=True, help="libheapwalk_bench.so")
    ap.add_argument("--mib", type=int, default=256, help="live heap to build (MiB)")
    ap.add_argument("--budget", type=int, default=2000000,
                    help="objects the tagging walk may tag (leakcheck's path_objects)")
    ap.add_argument("--leakcheck", help="libleakcheck.so: also run its path search")
    args = ap.parse_args()
    heap = f"--heap={max(1, (args.mib * 3) // 1024 + 1)}g"
    cmd = [args.minivm, "--verbose:gc", heap, f"-agentpath:{args.agent}=budget={args.budget}",
           PROGRAM, str(args.mib)]
    print("$", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"minivm failed ({r.returncode}):\n{r.stderr[-2000:]}")
    walks = WALK.findall(r.stderr)
    names = ["follow", "iterate", "search", "untag"]
    if len(walks) != len(names):
        sys.exit(f"expected {len(names)} heap walk lines, got {len(walks)}:\n{r.stderr[-2000:]}")
    print(f"live heap: {args.mib} MiB of 32-byte objects")
    print(f"{'walk':8} {'objects':>10} {'refs':>10} {'pause ms':>10} {'ms/MiB':>8} {'ns/object':>10}")
    for name, (roots, objects, refs, aborted, ms) in zip(names, walks):
        objects, ms = int(objects), float(ms)
        # The tagging walks cover only the objects they tagged.
        mib = args.mib if name in ("follow", "iterate") else objects * 32 / 1048576
        print(f"{name:8} {objects:>10} {int(refs):>10} {ms:>10.1f} {ms / max(mib, 1e-9):>8.2f} "
              f"{ms * 1e6 / max(objects, 1):>10.1f}{'  (aborted at the budget)' if aborted else ''}")
    if args.leakcheck:
        cmd = [args.minivm, "--verbose:gc", heap,
               # gc_every: snapshots on a fixed schedule, since the pacer holds back
               # full collections of a heap this size (docs/tools.md, leakcheck).
               f"-agentpath:{args.leakcheck}=path_objects={args.budget},gc_every=128m", PROGRAM,
               str(args.mib)]
        print("$", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"minivm with leakcheck failed ({r.returncode}):\n{r.stderr[-2000:]}")
        for line in r.stderr.splitlines():
            if ("retained by" in line or "LEAK?" in line or PATHS.match(line) or
                    line.startswith("[gc] heap walk")):
                print(line)


if __name__ == "__main__":
    main()
