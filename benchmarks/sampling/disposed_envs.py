#!/usr/bin/env python3
"""What a sample costs after N environments were made and disposed.

A process that started and stopped a thousand profiles (statmemprof's test
suite does; a service profiled through attach for weeks) must sample as
cheaply as one that only ever had the one live profile: dispatch visits the
environments alive, not every one ever made (docs/agent-api.md, "Delivery
rules"). Runs benchmarks/programs/alloc_loop.mv at interval 0 (every
allocation sampled, an empty callback) with bench_agent's disposed=0 and
disposed=N, interleaved, and prints the CPU time of each and their ratio.

  python3 benchmarks/sampling/disposed_envs.py --minivm build/bin/minivm \\
      --agent build/benchmarks/agents/libbench_agent.so [--disposed 1000] [--rounds 9]
"""
import argparse
import os
import resource
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_seconds(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minivm", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--disposed", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--n", type=int, default=2000000, help="allocations (all sampled)")
    a = ap.parse_args()
    prog = os.path.join(ROOT, "benchmarks", "programs", "alloc_loop.mv")
    runs = {0: [], a.disposed: []}
    for _ in range(a.rounds):
        for d in runs:
            opts = f"mode=empty,interval=0,disposed={d}"
            runs[d].append(cpu_seconds([a.minivm, f"-agentpath:{a.agent}={opts}", prog, str(a.n)]))
    base = statistics.median(runs[0])
    many = statistics.median(runs[a.disposed])
    print(f"alloc_loop {a.n}, every allocation sampled, median of {a.rounds} interleaved rounds")
    print(f"  one environment ever:              {base:.3f} s CPU ({base / a.n * 1e9:.0f} ns per sample)")
    print(f"  after {a.disposed} disposed environments: {many:.3f} s CPU ({many / a.n * 1e9:.0f} ns per sample)")
    print(f"  ratio: {many / base:.3f}")


if __name__ == "__main__":
    main()
