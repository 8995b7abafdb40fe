#!/usr/bin/env python3
"""What heapprof's live HTTP endpoint costs the VM (docs/performance.md,
"heapprof's live endpoint").

Runs a program under heapprof in four configurations, interleaved round by
round (each round starting with the next one) so that machine drift hits
all alike:
  no-http   heapprof without http=
  idle      http=0 and no client: a server waiting
  heap      a client fetching /debug/pprof/heap back to back for the whole run
  text      the same for /debug/pprof/heap?debug=1 (the legacy text)
and reports medians of the VM's CPU time (user + sys of all its threads, from
wait4: the client runs in this script), of the requests served, and the CPU
time per request, (cpu(config) - cpu(idle)) / requests; also the size of one
response at the end of the run.

With --fake-vm, instead counts instructions (callgrind, which does not
depend on the machine's load): the tests' stand-in VM runs the leak workload
under heapprof, then idles while this script makes --requests requests of
each form, and the instructions per request are the difference from a run
with none.

  benchmarks/http_cost.py --minivm build/bin/minivm [--agents-dir build/bin] \
      [--rounds 7] [--interval 64k] [--program examples/programs/leaky_cache.mv] [ARGS]
  benchmarks/http_cost.py --fake-vm build/tests/tools/tools_fake_vm \
      --agents-dir build/bin [--requests 100] [--interval 4k]
"""
import argparse
import http.client
import os
import re
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Client(threading.Thread):
    """Fetches `target` back to back until the server goes away."""

    def __init__(self, port, target):
        super().__init__(daemon=True)
        self.port, self.target, self.count, self.size = port, target, 0, 0

    def run(self):
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                c.request("GET", self.target)
                r = c.getresponse()
                body = r.read()
                c.close()
            except OSError:
                return
            if r.status != 200:
                return
            self.count += 1
            self.size = len(body)


def run_once(minivm, lib, opts, program, args, target):
    cmd = [minivm, f"-agentpath:{lib}={opts}", program, *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    client = None
    if target is not None:
        line = proc.stderr.readline().decode()
        m = re.search(r"serving http://127\.0\.0\.1:(\d+)/", line)
        if not m:
            sys.exit(f"no port from {' '.join(cmd)}: {line}")
        client = Client(int(m.group(1)), target)
        client.start()
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    if client is not None:
        client.join(timeout=60)
    return (usage.ru_utime + usage.ru_stime, client.count if client else 0,
            client.size if client else 0)


def instructions(fake_vm, lib, interval, target, n):
    """callgrind's instruction count for the fake VM serving `n` requests."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", fake_vm,
           "--workload=leak", f"--idle={10 + n * 0.3:.0f}",  # long enough for n requests
           f"-agentpath:{lib}=interval={interval},http=0,file=,top=0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err, port = "", None
    while "fake_vm: idle" not in err:
        line = proc.stderr.readline()
        if not line:
            sys.exit(f"failed: {' '.join(cmd)}\n{err}")
        err += line
        m = re.search(r"serving http://127\.0\.0\.1:(\d+)/", line)
        if m:
            port = int(m.group(1))
    size = 0
    for _ in range(n):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", target)
        size = len(c.getresponse().read())
        c.close()
    err += proc.stderr.read()
    proc.wait()
    return int(re.search(r"Collected : (\d+)", err).group(1)), size


def count_instructions(a, lib):
    interval = a.interval or "4k"
    base, _ = instructions(a.fake_vm, lib, interval, "/", 0)
    print(f"heapprof HTTP cost: fake VM (leak workload, interval {interval}), "
          f"{a.requests} requests each, callgrind")
    print(f"{'request':32} {'instructions/request':>20} {'bytes/resp':>10}")
    for target in ("/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/heap?debug=1",
                   "/debug/pprof/heap?gc=1"):
        total, size = instructions(a.fake_vm, lib, interval, target, a.requests)
        print(f"{target:32} {(total - base) / a.requests:20,.0f} {size:10}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm")
    ap.add_argument("--fake-vm")
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--agents-dir", help="folder of libheapprof.so (default: minivm's)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--interval", help="heapprof's interval (default 64k; 4k with --fake-vm)")
    ap.add_argument("--program", default=os.path.join(ROOT, "examples", "programs",
                                                      "leaky_cache.mv"))
    ap.add_argument("args", nargs="*", help="the program's arguments")
    a = ap.parse_args()
    if a.fake_vm:
        if not a.agents_dir:
            sys.exit("--fake-vm needs --agents-dir")
        return count_instructions(a, os.path.join(os.path.abspath(a.agents_dir), "libheapprof.so"))
    if not a.minivm:
        sys.exit("give --minivm (CPU time) or --fake-vm (instructions)")
    minivm = os.path.abspath(a.minivm)
    lib = os.path.join(os.path.abspath(a.agents_dir or os.path.dirname(minivm)), "libheapprof.so")
    interval = a.interval or "64k"
    base = f"interval={interval},file=,top=0"
    cfgs = [("no-http", base, None), ("idle", base + ",http=0", None),
            ("heap", base + ",http=0", "/debug/pprof/heap"),
            ("text", base + ",http=0", "/debug/pprof/heap?debug=1")]
    res = {c[0]: [] for c in cfgs}
    for i in range(a.rounds):
        # Each round starts with another configuration: a fixed order biases
        # the ones that follow a hammered run.
        for name, opts, target in cfgs[i % len(cfgs):] + cfgs[:i % len(cfgs)]:
            res[name].append(run_once(minivm, lib, opts, a.program, a.args, target))
    print(f"heapprof HTTP cost: {os.path.basename(a.program)} {' '.join(a.args)}, "
          f"interval {interval}, {a.rounds} interleaved rounds, medians")
    print(f"{'config':8} {'CPU s':>8} {'requests':>9} {'bytes/resp':>10} {'CPU ms/request':>15}")
    idle = statistics.median(r[0] for r in res["idle"])
    for name, _, target in cfgs:
        cpu = statistics.median(r[0] for r in res[name])
        n = statistics.median(r[1] for r in res[name])
        size = statistics.median(r[2] for r in res[name])
        per = f"{(cpu - idle) / n * 1000:15.3f}" if n else f"{'':15}"
        print(f"{name:8} {cpu:8.3f} {n:9.0f} {size:10.0f} {per}")


if __name__ == "__main__":
    main()
