#!/usr/bin/env python3
"""Regenerates the example outputs in docs/tools.md by running the tools.

Each output block in docs/tools.md follows a marker `<!-- output: NAME -->`;
this script runs the command behind every NAME (shown as the block's first
line, `$ ...`) and prints the blocks, or with --write replaces them in place.

  tests/tools/doc_outputs.py --minivm build/bin/minivm [--agents-dir build/bin] [--write]
      [--only NAME]...   (only these blocks, e.g. --only LIFETIMES)

With --fake-vm PATH the commands run on the tests' stand-in VM instead
(tools_fake_vm: --workload=leak for leaky_cache, steady for steady.mv, mixed
for binary_trees), for when minivm cannot load agents; the blocks then say so.
Needs `go` for the pprof blocks.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DOC = os.path.join(ROOT, "docs", "tools.md")


def sh(cmd, cwd):
    r = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, cwd=cwd)
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm")
    ap.add_argument("--agents-dir")
    ap.add_argument("--fake-vm")
    ap.add_argument("--overhead", help="a file with tools_overhead.py's output")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--only", action="append",
                    help="regenerate only these blocks (e.g. LEAKCHECK-CACHE); repeatable")
    a = ap.parse_args()
    agents = os.path.abspath(a.agents_dir or os.path.dirname(a.minivm or a.fake_vm))
    work = tempfile.mkdtemp(prefix="tools_doc_")
    for p in ("examples/programs/leaky_cache.mv", "examples/programs/binary_trees.mv",
              "tests/tools/steady.mv"):
        shutil.copy(os.path.join(ROOT, p), work)
    fake = a.fake_vm is not None

    def ag(name, opts=""):
        return f"-agentpath:{agents}/lib{name}.so" + (f"={opts}" if opts else "")

    def shown(name, opts=""):
        return f"-agentlib:{name}" + (f"={opts}" if opts else "")

    def vm(agent_args, prog, vm_opts=""):
        """(command to run, command to show)"""
        name, args = {"leaky_cache.mv": ("leak", "--scale=3"),
                      "steady.mv": ("steady", "--scale=5"),
                      "binary_trees.mv": ("mixed", "")}[prog.split()[0]]
        if fake:
            run = f"{os.path.abspath(a.fake_vm)} --workload={name} {args} --seed=1 {agent_args}"
        else:
            run = f"{os.path.abspath(a.minivm)} {vm_opts} --seed=1 {agent_args} {prog}"
        return run

    out = {}
    note = "(tests/tools fake VM, --workload=leak)\n" if fake else ""
    # The default invocation: no heap tuning (heapprof collects before each
    # profile, so live is live even though the default young generation
    # would see no collection in these short runs).
    s = sh(vm(ag("heapprof", "file=heap.pb.gz,dump_every=64m"), "leaky_cache.mv") +
           " 2>&1 >/dev/null", work)
    out["DUMPS"] = (note + f"$ minivm {shown('heapprof', 'file=heap.pb.gz,dump_every=64m')}"
                    " leaky_cache.mv\n" +
                    "\n".join(l for l in s.splitlines() if "(dump_every" in l))
    out["HEAPPROF-SUMMARY"] = (note + "$ minivm --heap-profile=heap.pb.gz leaky_cache.mv\n" +
                               "\n".join(l for l in s.splitlines() if "(dump_every" not in l))
    small = "--young=4m"
    # The profiles' comments (program, command, source root, liveness) come
    # first: 4 lines more than a profile without them.
    for key, args, n in (("PPROF-TOP", "-top heap.pb.gz", 18),
                         ("PPROF-LINES", "-sample_index=alloc_space -top -lines heap.pb.gz", 18),
                         ("PPROF-TAGFOCUS", "-traces -tagfocus=class=Entry heap.pb.gz", 20),
                         ("PPROF-DIFF", "-top -diff_base=heap.0001.pb.gz heap.pb.gz", 17)):
        text = sh(f"go tool pprof {args} 2>&1", work)
        out[key] = f"$ go tool pprof {args}\n" + "\n".join(text.splitlines()[:n])
    sh(vm(ag("heapprof", "format=collapsed,space=alloc,file=heap.folded,top=0"),
          "leaky_cache.mv") + " >/dev/null 2>&1", work)
    opts = "format=collapsed,space=alloc,file=heap.folded"
    out["COLLAPSED"] = (note + f"$ minivm {shown('heapprof', opts)}"
                        " leaky_cache.mv\n$ sort -t' ' -k2 -nr heap.folded | head -6\n" +
                        sh("sort -t' ' -k2 -nr heap.folded | head -6", work))
    # leakcheck and lifetimes: the default invocation (leakcheck forces the
    # full collections it needs).
    out["LEAKCHECK-CACHE"] = (note + "$ minivm -agentlib:leakcheck leaky_cache.mv\n" +
                              sh(vm(ag("leakcheck"), "leaky_cache.mv") + " 2>&1 >/dev/null",
                                 work))
    note_s = "(tests/tools fake VM, --workload=steady)\n" if fake else ""
    out["LEAKCHECK-STEADY"] = (note_s + "$ minivm -agentlib:leakcheck steady.mv\n" +
                               sh(vm(ag("leakcheck"), "steady.mv") + " 2>&1 >/dev/null", work))
    note_m = "(tests/tools fake VM, --workload=mixed)\n" if fake else ""
    out["LIFETIMES"] = (note_m + "$ minivm -agentlib:lifetimes binary_trees.mv 16\n" +
                        sh(vm(ag("lifetimes"), "binary_trees.mv 16") + " 2>&1 >/dev/null", work))
    out["LIFETIMES-YOUNG"] = (note_m + f"$ minivm {small} -agentlib:lifetimes=trace=trace.jsonl "
                              "binary_trees.mv 16\n" +
                              sh(vm(ag("lifetimes", "trace=trace.jsonl"), "binary_trees.mv 16",
                                    small) + " 2>&1 >/dev/null", work))
    trace = open(os.path.join(work, "trace.jsonl")).read().splitlines()
    pick = trace[:2]
    for ev in ('"promote"', '"free"'):
        pick += [l for l in trace if ev in l][:1]
    pick.append(trace[-1])
    out["TRACE"] = "$ head trace.jsonl  (and one promote, one free, the end)\n" + "\n".join(pick)
    if a.overhead:
        out["OVERHEAD"] = open(a.overhead).read().rstrip()
    doc = open(DOC).read()

    def repl(m):
        k = m.group(1)
        if k not in out or (a.only and k not in a.only):
            return m.group(0)
        return f"<!-- output: {k} -->\n```\n{out[k].rstrip()}\n```"
    doc = re.sub(r"<!-- output: ([A-Z-]+) -->\n```\n.*?\n```", repl, doc, flags=re.S)
    if a.write:
        open(DOC, "w").write(doc)
        print(f"updated {DOC} ({len(out)} blocks); work dir {work}")
    else:
        for k, v in out.items():
            if a.only and k not in a.only:
                continue
            print(f"== {k}\n{v}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
