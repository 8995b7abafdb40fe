#!/usr/bin/env python3
"""Sampling overhead, as CPU-time ratios against sampling off, in one run.

For each program (an allocation loop, binary trees, a multi-threaded
allocator) and each configuration:
  off         no agent
  off-again   no agent (a second, interleaved sample: the noise floor)
  capability  the agent holds can_generate_sampled_alloc_events, event off
  empty       SampledObjectAlloc enabled at 512 KiB, empty callback
  stackweak   512 KiB, callback takes a 64-frame stack trace and a weak ref
runs every configuration ROUNDS times, interleaved round by round so that
machine drift hits all alike, and reports the median CPU time (user + sys of
the child) and its ratio to `off`.

  benchmarks/sampling_overhead.py --minivm build/bin/minivm \
      --agent build/benchmarks/agents/libbench_agent.so [--rounds 11] \
      [--vm-arg=--jit=eager] [--callgrind]

--vm-arg passes a VM option to every run (for example --jit=eager: the
overhead in compiled code, docs/jit.md). --callgrind counts instructions
with `valgrind --tool=callgrind` instead of timing (one run per
configuration; the counts repeat exactly, whatever the machine's load), and
prints the added instructions of each configuration relative to `off`.
"""
import argparse
import os
import statistics

from benchlib import count_instructions, run_once

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAMS = [
    ("alloc_loop", os.path.join(HERE, "programs", "alloc_loop.mv"), ["50000000"]),
    ("binary_trees", os.path.join(HERE, "programs", "binary_trees.mv"), ["17"]),
    ("mt_alloc", os.path.join(HERE, "sampling", "mt_alloc.mv"), ["2", "20000000"]),
]


def configs(agent, interval):
    a = lambda opts: [f"-agentpath:{agent}={opts}"]
    return [
        ("off", []),
        ("off-again", []),
        ("capability", a("mode=capability")),
        ("empty", a(f"mode=empty,interval={interval}")),
        ("stackweak", a(f"mode=stackweak,interval={interval}")),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--interval", type=int, default=512 * 1024)
    ap.add_argument("--program", action="append", help="only these programs")
    ap.add_argument("--vm-arg", action="append", default=[], help="a VM option for every run")
    ap.add_argument("--callgrind", action="store_true", help="count instructions instead of timing")
    ap.add_argument("--args", action="append", default=[], metavar="PROGRAM=ARGS",
                    help="program arguments, e.g. alloc_loop=5000000 (callgrind runs want smaller ones)")
    args = ap.parse_args()
    cfgs = configs(os.path.abspath(args.agent), args.interval)
    overrides = dict(a.split("=", 1) for a in args.args)
    # The programs asked for (all by default), each with its arguments.
    programs = [(name, path, overrides[name].split() if name in overrides else pargs)
                for name, path, pargs in PROGRAMS
                if not args.program or name in args.program]
    if args.callgrind:
        print(f"minivm sampling overhead: instructions (callgrind), interval {args.interval} B, "
              f"VM options {args.vm_arg or 'none'}")
        print(f"{'program':14} " + " ".join(f"{name:>14}" for name, _ in cfgs))
        for name, path, pargs in programs:
            counts = {c: count_instructions([args.minivm, *args.vm_arg, *copts, path, *pargs])
                      for c, copts in cfgs if c != "off-again"}
            counts["off-again"] = counts["off"]
            print(f"{name:14} " + " ".join(f"{counts[c]:14d}" for c, _ in cfgs))
            print(f"{'  added':14} " +
                  " ".join(f"{100 * (counts[c] - counts['off']) / counts['off']:+13.3f}%" for c, _ in cfgs))
        return
    print(f"minivm sampling overhead: {args.rounds} interleaved rounds, "
          f"interval {args.interval} B, median CPU seconds (user+sys)")
    print(f"{'program':14} " + " ".join(f"{name:>12}" for name, _ in cfgs))
    for name, path, pargs in programs:
        times = {c: [] for c, _ in cfgs}
        for _ in range(args.rounds):
            for cname, copts in cfgs:
                times[cname].append(run_once([args.minivm, *args.vm_arg, *copts, path, *pargs])[0])
        med = {c: statistics.median(v) for c, v in times.items()}
        print(f"{name:14} " + " ".join(f"{med[c]:12.3f}" for c, _ in cfgs))
        print(f"{'  ratio':14} " + " ".join(f"{med[c] / med['off']:12.4f}" for c, _ in cfgs))


if __name__ == "__main__":
    main()
