#!/usr/bin/env python3
"""What profiling costs the VM: the remote agent (records to minivm-collector
over shared memory) against heapprof (all bookkeeping in-process), at the
default 512 KiB interval and at 4 KiB, in one run.

Configurations, per program:
  off              no agent
  off-again        no agent again, interleaved (the noise floor; CPU mode)
  heapprof-512k    -agentlib:heapprof=interval=524288 (writes its profile at exit)
  remote-512k      -agentlib:remote=socket=...,interval=524288
  heapprof-4k      the same at 4096
  remote-4k

Two measurements:
  --mode cpu (default): CPU time (user + sys) of the VM process, median of
      ROUNDS interleaved rounds, as a ratio to `off`; for the remote
      configurations also the collector's CPU time for the same runs (from
      /proc/PID/stat before and after each run), which is work moved out of
      the VM, not removed.
  --mode callgrind: instructions the VM process executes (valgrind
      --tool=callgrind), which do not depend on the machine's load, and from
      them the cost per sample: (I(4k) - I(off)) / samples(4k), samples as
      each agent reports them at exit (the same seed samples the same
      allocations).

The collector runs natively in both modes (one instance for the whole run).

  benchmarks/collector_overhead.py --minivm build/bin/minivm [--mode cpu|callgrind]
      [--agents-dir build/bin] [--collector build/bin/minivm-collector]
      [--rounds 7] [--program alloc_loop] [--program binary_trees]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

ARGS = {
    "cpu": {"alloc_loop": ["20000000"], "binary_trees": ["18"]},
    "callgrind": {"alloc_loop": ["5000000"], "binary_trees": ["14"]},
}
INTERVALS = [("512k", 524288), ("4k", 4096)]


# VM options added to every run (--vm-arg).
VM_ARGS = []

def configs(agents_dir, sock, out_dir, with_again):
    heap = os.path.join(out_dir, "heap.pb.gz")
    out = [("off", [])]
    if with_again:
        out.append(("off-again", []))
    for name, interval in INTERVALS:
        out.append((f"heapprof-{name}", [f"-agentpath:{agents_dir}/libheapprof.so="
                                         f"file={heap},interval={interval}"]))
        out.append((f"remote-{name}", [f"-agentpath:{agents_dir}/libremote.so="
                                       f"socket={sock},interval={interval}"]))
    return out


def proc_cpu(pid):
    """utime + stime of a process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def samples_of(stderr):
    m = re.search(r"heapprof: (\d+) samples", stderr) or re.search(r"remote: sent (\d+) samples",
                                                                     stderr)
    return int(m.group(1)) if m else 0


def run_cpu(cmd, collector_pid):
    before = proc_cpu(collector_pid)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    time.sleep(0.1)  # the collector's final dump for this VM (its CPU is counted below)
    return usage.ru_utime + usage.ru_stime, proc_cpu(collector_pid) - before, samples_of(err)


def run_callgrind(cmd):
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-3000:]}")
    m = re.search(r"Collected : (\d+)", r.stderr)
    return int(m.group(1)), samples_of(r.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm", required=True)
    ap.add_argument("--agents-dir", help="folder of libheapprof.so and libremote.so "
                    "(default: the folder of minivm)")
    ap.add_argument("--collector", help="default: minivm-collector beside minivm")
    ap.add_argument("--mode", choices=["cpu", "callgrind"], default="cpu")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--program", action="append", help="only these programs")
    ap.add_argument("--vm-arg", action="append", default=[],
                    help="a VM option for every run (docs/performance.md used --jit=off)")
    args = ap.parse_args()
    VM_ARGS.extend(args.vm_arg)
    minivm = os.path.abspath(args.minivm)
    agents_dir = os.path.abspath(args.agents_dir or os.path.dirname(minivm))
    collector = os.path.abspath(args.collector or
                                os.path.join(os.path.dirname(minivm), "minivm-collector"))
    for f in (os.path.join(agents_dir, "libheapprof.so"), os.path.join(agents_dir, "libremote.so"),
              collector):
        if not os.path.exists(f):
            sys.exit(f"missing {f} (build it, or pass --agents-dir / --collector)")
    if args.mode == "callgrind" and not shutil.which("valgrind"):
        sys.exit("valgrind not installed (apt-get install valgrind)")
    programs = [p for p in ARGS[args.mode] if not args.program or p in args.program]
    with tempfile.TemporaryDirectory(prefix="coll_bench_") as tmp:
        sock = os.path.join(tmp, "c.sock")
        log = open(os.path.join(tmp, "collector.log"), "w+")
        coll = subprocess.Popen([collector, f"--socket={sock}", f"--out={tmp}/out"],
                                stdout=subprocess.DEVNULL, stderr=log)
        try:
            for _ in range(600):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            cfgs = configs(agents_dir, sock, tmp, args.mode == "cpu")
            if args.mode == "cpu":
                cpu_mode(minivm, programs, cfgs, args.rounds, coll.pid)
            else:
                callgrind_mode(minivm, programs, cfgs)
        finally:
            coll.terminate()
            coll.wait()


def cpu_mode(minivm, programs, cfgs, rounds, collector_pid):
    print(f"remote agent vs heapprof: {rounds} interleaved rounds, median CPU seconds of the VM "
          f"(user+sys); collector CPU for the remote runs in brackets")
    names = [n for n, _ in cfgs]
    print(f"{'program':<14}" + "".join(f"{n:>15}" for n in names))
    for prog in programs:
        path = os.path.join(HERE, "programs", f"{prog}.mv")
        vm_t = {n: [] for n in names}
        coll_t = {n: [] for n in names}
        for _ in range(rounds):
            for n, agent in cfgs:
                t, c, _ = run_cpu([minivm, "--seed=1", *VM_ARGS, *agent, path, *ARGS["cpu"][prog]],
                                  collector_pid)
                vm_t[n].append(t)
                coll_t[n].append(c)
        med = {n: statistics.median(vm_t[n]) for n in names}
        print(f"{prog:<14}" + "".join(f"{med[n]:>15.3f}" for n in names))
        print(f"{'  ratio':<14}" + "".join(f"{med[n] / med['off']:>15.4f}" for n in names))
        print(f"{'  collector':<14}" + "".join(
            f"{'[%.3f]' % statistics.median(coll_t[n]) if n.startswith('remote') else '':>15}"
            for n in names))
        sys.stdout.flush()


def callgrind_mode(minivm, programs, cfgs):
    print("remote agent vs heapprof: instructions executed by the VM process (callgrind)")
    for prog in programs:
        path = os.path.join(HERE, "programs", f"{prog}.mv")
        res = {n: run_callgrind([minivm, "--seed=1", *VM_ARGS, *agent, path, *ARGS["callgrind"][prog]])
               for n, agent in cfgs}
        off = res["off"][0]
        print(f"{prog} {' '.join(ARGS['callgrind'][prog])}: off {off:,} instructions")
        for n, _ in cfgs[1:]:
            instr, samples = res[n]
            print(f"  {n:<15} {instr:>15,}  {100.0 * (instr - off) / off:+8.3f}%  "
                  f"{samples:>8} samples")
        for agent in ("heapprof", "remote"):
            i4, s4 = res[f"{agent}-4k"]
            print(f"  {agent} per sample (4k): {(i4 - off) / max(1, s4):,.0f} instructions")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
