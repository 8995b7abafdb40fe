#!/usr/bin/env python3
"""Overhead of the tool agents at their default settings, as CPU-time ratios
against no agent, in one run.

For each program in benchmarks/programs/*.mv and each configuration:
  off         no agent
  off-again   no agent (a second, interleaved sample: the noise floor)
  heapprof    -agentlib:heapprof (512 KiB, the VM's default interval; writes
              its pprof file and summary at exit)
  leakcheck   -agentlib:leakcheck (32 KiB, and its forced full collections)
  lifetimes   -agentlib:lifetimes (256 KiB, report only, no trace file)
  all-three   the three together (one sampler, three environments)
runs every configuration ROUNDS times, interleaved round by round so that
machine drift hits all alike, and reports the median CPU time (user + sys of
the child) and its ratio to `off`. The target for heapprof at 512 KiB is a
ratio under 1.02.

  benchmarks/tools_overhead.py --minivm build/bin/minivm \
      [--agents-dir build/bin] [--rounds 11] [--program binary_trees]
"""
import argparse
import glob
import os
import statistics
import sys
import tempfile

from benchlib import run_once

HERE = os.path.dirname(os.path.abspath(__file__))

# Arguments sized like sampling_overhead.py's: long enough to time.
ARGS = {
    "alloc_loop": ["20000000"],
    "binary_trees": ["18"],
    "loops": ["30000000"],
}


def configs(agents_dir, out_dir):
    def a(name, opts=""):
        lib = os.path.join(agents_dir, f"lib{name}.so")
        return f"-agentpath:{lib}" + (f"={opts}" if opts else "")
    heap = os.path.join(out_dir, "heap.pb.gz")
    return [
        ("off", []),
        ("off-again", []),
        ("heapprof", [a("heapprof", f"file={heap}")]),
        ("leakcheck", [a("leakcheck")]),
        ("lifetimes", [a("lifetimes")]),
        ("all-three", [a("heapprof", f"file={heap}"), a("leakcheck"), a("lifetimes")]),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm", required=True)
    ap.add_argument("--agents-dir", help="folder of lib{heapprof,leakcheck,lifetimes}.so "
                    "(default: the folder of minivm)")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--program", action="append", help="only these programs")
    args = ap.parse_args()
    minivm = os.path.abspath(args.minivm)
    agents_dir = os.path.abspath(args.agents_dir or os.path.dirname(minivm))
    for name in ("heapprof", "leakcheck", "lifetimes"):
        if not os.path.exists(os.path.join(agents_dir, f"lib{name}.so")):
            sys.exit(f"no lib{name}.so in {agents_dir} (build the agents, or pass --agents-dir)")
    programs = sorted(glob.glob(os.path.join(HERE, "programs", "*.mv")))
    with tempfile.TemporaryDirectory(prefix="tools_overhead_") as out_dir:
        cfgs = configs(agents_dir, out_dir)
        print(f"minivm tool-agent overhead: {args.rounds} interleaved rounds, default "
              f"settings, median CPU seconds (user+sys)")
        print(f"{'program':14} " + " ".join(f"{name:>10}" for name, _ in cfgs))
        for path in programs:
            name = os.path.splitext(os.path.basename(path))[0]
            if args.program and name not in args.program:
                continue
            times = {c: [] for c, _ in cfgs}
            for _ in range(args.rounds):
                for cname, copts in cfgs:
                    cmd = [minivm, *copts, path, *ARGS.get(name, [])]
                    times[cname].append(run_once(cmd, out_dir)[0])
            med = {c: statistics.median(v) for c, v in times.items()}
            print(f"{name:14} " + " ".join(f"{med[c]:10.3f}" for c, _ in cfgs))
            print(f"{'  ratio':14} " + " ".join(f"{med[c] / med['off']:10.4f}" for c, _ in cfgs))
            sys.stdout.flush()
        print("target: heapprof ratio < 1.02 at 512 KiB")


if __name__ == "__main__":
    main()
