#!/usr/bin/env python3
"""Two minivm builds side by side on whole programs: user and system CPU
seconds and peak resident memory, medians over interleaved rounds.

    benchmarks/compare_builds.py OLD_MINIVM NEW_MINIVM [--runs N]

For a change to the runtime (the heap's sizing, say), build the commit
before it elsewhere (`git worktree add /tmp/base HEAD~1`, then build there)
and pass both binaries. Each round runs every (program, build) pair once,
the old build first, so a change in the machine's load hits both alike. The
system time is reported apart from the user time because first-touch page
faults, which a heap's sizing decides, are system time. Every run's stdout
must equal the old build's first output, or the script stops.
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# (label, minivm arguments after the binary); paths relative to benchmarks/.
PROGRAMS = [
    ("binary trees 16, --jit=off", ["--jit=off", "programs/binary_trees.mv", "16"]),
    ("binary trees 16, --jit=auto", ["programs/binary_trees.mv", "16"]),
    ("binary trees 20, --jit=auto", ["programs/binary_trees.mv", "20"]),
    ("alloc32 200M, --jit=auto", ["jit/alloc32.mv", "200000000"]),
    ("alloc_mix 20M, --jit=auto", ["compare/alloc_mix.mv", "20000000"]),
    ("alloc_mix 20M, --jit=off", ["--jit=off", "compare/alloc_mix.mv", "20000000"]),
    ("fib 35, --jit=auto", ["jit/fib.mv", "35"]),
]


def measured(cmd):
    """(user s, sys s, peak RSS MiB, stdout) of one run; exits if it fails."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=HERE)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.stdout.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}")
    return usage.ru_utime, usage.ru_stime, usage.ru_maxrss / 1024.0, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    builds = [("old", os.path.abspath(args.old)), ("new", os.path.abspath(args.new))]
    for _, path in builds:
        if not os.access(path, os.X_OK):
            sys.exit(f"compare_builds.py: not an executable: {path}")

    results = {(p, b): [] for p, _ in PROGRAMS for b, _ in builds}
    expected = {}
    for r in range(args.runs):
        print(f"round {r + 1}/{args.runs}, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
        for label, argv in PROGRAMS:
            for build, path in builds:
                user, system, rss, out = measured([path, *argv])
                if expected.setdefault(label, out) != out:
                    sys.exit(f"output mismatch: {label}, {build} build")
                results[(label, build)].append((user, system, rss))

    print(f"medians of {args.runs} interleaved rounds; old = {args.old}, new = {args.new}")
    print(f"{'program':30} {'build':5} {'user_s':>7} {'sys_s':>7} {'cpu_s':>7} {'rss_MiB':>8} "
          f"{'cpu new/old':>11}")
    for label, _ in PROGRAMS:
        cpu = {}
        for build, _ in builds:
            rows = results[(label, build)]
            user = statistics.median(x[0] for x in rows)
            system = statistics.median(x[1] for x in rows)
            cpu[build] = statistics.median(x[0] + x[1] for x in rows)
            rss = statistics.median(x[2] for x in rows)
            ratio = f"{cpu['new'] / cpu['old']:.2f}" if build == "new" and cpu["old"] > 0 else ""
            print(f"{label:30} {build:5} {user:7.3f} {system:7.3f} {cpu[build]:7.3f} {rss:8.0f} "
                  f"{ratio:>11}")


if __name__ == "__main__":
    main()
