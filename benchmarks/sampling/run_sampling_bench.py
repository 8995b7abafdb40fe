#!/usr/bin/env python3
"""What heap sampling costs, and what the allocator around it costs, in CPU
time (user + sys of the child, all its threads), medians of interleaved
rounds; optionally two builds side by side.

Sections (--section, default all):
  overhead  whole programs in compiled code: a mixed-size allocation loop
            (compare/alloc_mix.mv) and binary trees (programs/binary_trees.mv)
            with the sampler off, at a 32 KiB interval with a callback that
            takes a 64-frame stack (bench_agent mode=stack), and with a stack
            and a weak reference kept per sample (mode=stackweak, the latest
            4,096 kept). Reported
            as the added CPU time in % of `off`.
  sample    the cost of one sample: programs/alloc_loop.mv at interval 0
            (every allocation sampled, so every allocation takes the slow
            path) with an empty callback and with stack + weak reference,
            minus `off`, divided by the samples bench_agent counts: ns/sample.
  refill    the cost of one TLAB refill: programs/alloc_loop.mv (24-byte
            objects) with every TLAB fixed at 1 KiB against 256 KiB
            (--tlab-size), the difference divided by the difference in
            refills (objects / objects per TLAB): ns/refill.
  threads   sampling/mt_alloc.mv at 1, 2, 4 and 16 threads sharing one fixed
            number of objects, sampler off and at 32 KiB with stack + weak
            reference: objects per CPU-microsecond.

  benchmarks/sampling/run_sampling_bench.py --minivm build/bin/minivm \\
      --agent build/benchmarks/agents/libbench_agent.so \\
      [--baseline /tmp/base/build/bin/minivm] [--rounds 5] [--section sample]

--baseline runs a second build in the same rounds (each case on both builds
one after the other, which goes first alternating by round), loading the
same agent, and adds its figures and the ratio new / baseline. The agent
includes only vmti.h, so one build of it serves both. Every run's stdout
must equal the first run's of the same program and arguments, or the script
stops. CPU time on a shared machine is noisy: read the ratios, and the
spread (the lowest and highest of the rounds) printed beside each median.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)

KIB = 1024
INTERVAL = 32 * KIB
ALLOC_LOOP = os.path.join(BENCH, "programs", "alloc_loop.mv")
ALLOC_LOOP_OBJECT = 24  # bytes: `class C { x }`, a 16-byte header and one field
REFILL_TLABS = (1 * KIB, 256 * KIB)
THREADS = (1, 2, 4, 16)
# stackweak keeps the latest 4,096 records and deletes the weak reference of
# each one it drops, as a profiler does once its objects die: storing every
# sample would grow the agent by 1 KiB a sample and time its reallocation.
KEEP = "keep=4096"


def cases(agent, sizes):
    """(section, case, label, minivm arguments) for every run of a round."""
    a = lambda opts: [f"-agentpath:{agent}={opts}"]
    out = []
    for prog, path, arg in (("alloc_mix", os.path.join(BENCH, "compare", "alloc_mix.mv"),
                             sizes["alloc_mix"]),
                            ("binary_trees", os.path.join(BENCH, "programs", "binary_trees.mv"),
                             sizes["binary_trees"])):
        for cfg, opts in (("off", []), ("stack", a(f"mode=stack,interval={INTERVAL}")),
                          ("stackweak", a(f"mode=stackweak,interval={INTERVAL},{KEEP}"))):
            out.append(("overhead", prog, cfg, [*opts, path, str(arg)]))
    n = str(sizes["sample"])
    for cfg, opts in (("off", []), ("empty", a("mode=empty,interval=0")),
                      ("stackweak", a(f"mode=stackweak,interval=0,{KEEP}"))):
        out.append(("sample", "alloc_loop", cfg, [*opts, ALLOC_LOOP, n]))
    n = str(sizes["refill"])
    for tlab in REFILL_TLABS:
        out.append(("refill", "alloc_loop", f"tlab {tlab // KIB}k",
                    [f"--tlab-size={tlab}", ALLOC_LOOP, n]))
    total = sizes["threads"]
    mt = os.path.join(HERE, "mt_alloc.mv")
    for t in THREADS:
        for cfg, opts in (("off", []), ("stackweak", a(f"mode=stackweak,interval={INTERVAL},{KEEP}"))):
            out.append(("threads", f"{t} threads", cfg, [*opts, mt, str(t), str(total // t)]))
    return out


def run(cmd):
    """(CPU seconds, stdout, stderr) of one run; exits if it fails."""
    with tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file)
        out = proc.stdout.read()
        # os.wait4, not proc.wait: the child's rusage is the measurement.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.stdout.close()
        err_file.seek(0)
        err = err_file.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    return usage.ru_utime + usage.ru_stime, out, err


def samples_of(stderr):
    m = re.search(r"bench_agent: (\d+) samples", stderr)
    return int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minivm", required=True, help="the build measured")
    ap.add_argument("--agent", required=True, help="libbench_agent.so")
    ap.add_argument("--baseline", help="a second minivm, run interleaved with the first")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--section", action="append", choices=["overhead", "sample", "refill", "threads"],
                    help="only these sections (repeatable)")
    ap.add_argument("--vm-arg", action="append", default=None,
                    help="a VM option for every run (default --jit=eager: compiled code)")
    ap.add_argument("--quick", action="store_true", help="small sizes, to check the script")
    args = ap.parse_args()
    vm_args = args.vm_arg if args.vm_arg is not None else ["--jit=eager"]
    sizes = {"alloc_mix": 20_000_000, "binary_trees": 18, "sample": 1_000_000,
             "refill": 200_000_000, "threads": 160_000_000}
    if args.quick:
        sizes = {"alloc_mix": 100_000, "binary_trees": 12, "sample": 20_000,
                 "refill": 1_000_000, "threads": 320_000}
    builds = [("new", os.path.abspath(args.minivm))]
    if args.baseline:
        builds.append(("base", os.path.abspath(args.baseline)))
    for _, path in builds:
        if not os.access(path, os.X_OK):
            sys.exit(f"run_sampling_bench.py: not an executable: {path}")
    agent = os.path.abspath(args.agent)
    todo = [c for c in cases(agent, sizes) if not args.section or c[0] in args.section]

    times = {}    # (build, section, case, label) -> [CPU s]
    samples = {}  # (build, section, case, label) -> samples (the same every run)
    expected = {}
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
        order = builds if r % 2 == 0 else builds[::-1]
        for section, case, label, argv in todo:
            for build, path in order:
                cpu, out, err = run([path, *vm_args, *argv])
                key = (section, case, label)
                # The agent's and the VM's options never change the output.
                if expected.setdefault((section, case), out) != out:
                    sys.exit(f"output differs: {section} {case} {label}, {build} build")
                times.setdefault((build, *key), []).append(cpu)
                if (n := samples_of(err)) is not None:
                    samples[(build, *key)] = n

    med = {k: statistics.median(v) for k, v in times.items()}
    spread = {k: (min(v), max(v)) for k, v in times.items()}
    names = [b for b, _ in builds]
    print(f"minivm sampling benchmarks: {args.rounds} interleaved rounds, VM options "
          f"{' '.join(vm_args) or 'none'}, median CPU s (user+sys) [min-max]")
    for build, path in builds:
        print(f"  {build:4} = {path}")

    def row(label, values):
        print(f"  {label:34} " + "  ".join(f"{v:>22}" for v in values))

    def cell(build, key):
        lo, hi = spread[(build, *key)]
        return f"{med[(build, *key)]:.3f} [{lo:.3f}-{hi:.3f}]"

    sections = []
    for section, case, label, _ in todo:
        if section not in sections:
            sections.append(section)
    for section in sections:
        print(f"\n{section}")
        row("", names + (["new / base"] if len(builds) == 2 else []))
        for s, case, label, _ in todo:
            if s != section:
                continue
            key = (s, case, label)
            ratio = [f"{med[('new', *key)] / med[('base', *key)]:.3f}"] if len(builds) == 2 else []
            row(f"{case}, {label}", [cell(b, key) for b in names] + ratio)
        derived = derive(section, todo, med, samples, names, sizes)
        for label, values in derived:
            # A percentage compares as a difference (points), anything else as a ratio.
            if len(builds) != 2:
                last = []
            elif label.endswith("%"):
                last = [f"{values[0] - values[1]:+.2f} points"]
            else:
                last = [f"{values[0] / values[1]:.3f}" if values[1] else ""]
            row(label, [f"{v:.2f}" for v in values] + last)


def derive(section, todo, med, samples, names, sizes):
    """The figures each section exists for, per build."""
    out = []
    if section == "overhead":
        for prog in ("alloc_mix", "binary_trees"):
            for cfg in ("stack", "stackweak"):
                out.append((f"{prog} {cfg}: added %",
                            [100 * (med[(b, section, prog, cfg)] / med[(b, section, prog, "off")] - 1)
                             for b in names]))
    elif section == "sample":
        for cfg in ("empty", "stackweak"):
            vals = []
            for b in names:
                n = samples.get((b, section, "alloc_loop", cfg))
                d = med[(b, section, "alloc_loop", cfg)] - med[(b, section, "alloc_loop", "off")]
                vals.append(1e9 * d / n if n else float("nan"))
            out.append((f"{cfg}: ns/sample", vals))
    elif section == "refill":
        small, large = REFILL_TLABS
        refills = lambda tlab: sizes["refill"] / (tlab // ALLOC_LOOP_OBJECT)
        extra = refills(small) - refills(large)
        out.append(("ns/refill", [1e9 * (med[(b, section, "alloc_loop", f"tlab {small // KIB}k")] -
                                        med[(b, section, "alloc_loop", f"tlab {large // KIB}k")]) / extra
                                  for b in names]))
    elif section == "threads":
        for t in THREADS:
            for cfg in ("off", "stackweak"):
                out.append((f"{t} threads {cfg}: objects/CPU-us",
                            [sizes["threads"] / 1e6 / med[(b, section, f"{t} threads", cfg)]
                             for b in names]))
    return out


if __name__ == "__main__":
    main()
