#!/usr/bin/env python3
"""Dumps the LLVM IR the JIT generates for a set of programs, and compares dumps.

A change to vm/jit that should not change the generated code (a refactoring,
a comment) is checked by dumping the IR with the build before the change and
with the build after it, then comparing the two dumps:

  dump_ir.py dump --minivm before/bin/minivm --out /tmp/ir-before \
      tests/language examples/programs
  dump_ir.py dump --minivm after/bin/minivm --out /tmp/ir-after \
      tests/language examples/programs
  dump_ir.py compare /tmp/ir-before /tmp/ir-after \
      --minivm before/bin/minivm --minivm-after after/bin/minivm

Each program runs under --print-jit in three configurations:
  quick     --jit=eager at the largest --jit-threshold: every function's
            quick-tier code (after SROA, the only pass the quick tier runs),
            and no tier-up in the background, whose timing varies;
  opt-raw   --jit=eager --jit-threshold=2 --jit-sync --jit-opt=0: the
            optimising tier's code as emitted (LLVM's -O0 pipeline leaves
            it as it is), for every function hot enough to tier up;
  opt       the same at the default --jit-opt: the code that runs.
A dump holds, per program and configuration, the functions' IR sorted by
function name (eager compiles on several threads, so the order of --print-jit
blocks varies) with absolute addresses masked (ASLR moves classes, caches and
code). Whatever a program prints or how it exits is not compared: programs
that expect errors compile too.

IR that depends on what ran before the compile (a field site's inline cache,
read at compile time, in a program with threads) may differ between two runs
of one build. compare reruns the programs whose dumps differ, up to --reruns
times each: with --minivm-after, the after build, until one run's IR is the
before dump's; then with --minivm, the before build, to show that the IR
varies from run to run on its own. It fails only on programs whose IR neither
matches on a rerun nor varies on its own.
A function that only one of the two runs compiled (a thread's function that
got hot before the program ended in one run and not in the other) is listed,
not compared.
"""
import argparse
import concurrent.futures
import difflib
import os
import re
import subprocess
import sys

CONFIGS = {
    "quick": ["--jit=eager", f"--jit-threshold={1 << 30}"],
    "opt-raw": ["--jit=eager", "--jit-threshold=2", "--jit-sync", "--jit-opt=0"],
    "opt": ["--jit=eager", "--jit-threshold=2", "--jit-sync"],
}
BLOCK = re.compile(r"^; --print-jit: (\S+)\n(.*?^\}\n)", re.M | re.S)
ADDRESS = re.compile(r"\b\d{9,}\b")


def programs(paths):
    found = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
            continue
        for root, _, files in os.walk(path):
            found.extend(os.path.join(root, f) for f in files if f.endswith(".mv"))
    return sorted(found)


def program_args(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\s*// args: (.*)", line)
            if m:
                return m.group(1).split()
    return []


def dump_one(minivm, path, config, timeout):
    cmd = [minivm, *CONFIGS[config], "--print-jit", path, *program_args(path)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, errors="replace")
        stderr = p.stderr
    except subprocess.TimeoutExpired as e:
        stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (
            e.stderr or "")
        stderr += "\n; dump_ir: timed out\n"
    blocks = sorted((name, ADDRESS.sub("ADDR", body)) for name, body in BLOCK.findall(stderr))
    text = "".join(f"; --print-jit: {name}\n{body}" for name, body in blocks)
    if "; dump_ir: timed out" in stderr:
        text += "; dump_ir: timed out\n"
    return text


def out_path(out, root_rel, config):
    return os.path.join(out, root_rel.replace(os.sep, "__") + f".{config}.ll")


def cmd_dump(args):
    os.makedirs(args.out, exist_ok=True)
    paths = programs(args.paths)
    jobs = [(p, c) for p in paths for c in CONFIGS]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(dump_one, args.minivm, p, c, args.timeout): (p, c) for p, c in jobs}
        for future in concurrent.futures.as_completed(futures):
            p, c = futures[future]
            with open(out_path(args.out, os.path.relpath(p), c), "w", encoding="utf-8") as f:
                f.write(future.result())
    functions = 0
    for name in os.listdir(args.out):
        with open(os.path.join(args.out, name), encoding="utf-8") as f:
            functions += f.read().count("; --print-jit: ")
    print(f"dumped {len(paths)} programs x {len(CONFIGS)} configurations, "
          f"{functions} function IR blocks, into {args.out}")


COUNTER = re.compile(r"\bminivm\.\d+\.")
SYMBOL = re.compile(r'^define [^@]*@("[^"]+"|[\w.$-]+)\(', re.M)


def blocks_of(text):
    """The dump's IR blocks by function name and symbol (a function's quick
    and optimised code are two symbols)."""
    blocks = {}
    for name, body in BLOCK.findall(text):
        m = SYMBOL.search(body)
        blocks.setdefault(f"{name} ({m.group(1) if m else '?'})", []).append(body)
    return blocks


def common_ir(before, after):
    """The IR of the functions both dumps compiled, in each dump.

    A program with threads may compile a function in one run and end before
    it gets hot in another; such a function has nothing to compare.
    """
    # A symbol numbers its function's compilations in the run's order.
    a, b = blocks_of(COUNTER.sub("minivm.N.", before)), blocks_of(COUNTER.sub("minivm.N.", after))
    names = sorted(a.keys() & b.keys())
    only = sorted(a.keys() ^ b.keys())
    return [a[n] for n in names], [b[n] for n in names], names, only


def cmd_compare(args):
    a = set(os.listdir(args.before))
    b = set(os.listdir(args.after))
    failures = []
    for name in sorted(a ^ b):
        failures.append(f"{name}: only in {'before' if name in a else 'after'}")
    unstable = []
    rerun_same = []
    one_sided = []
    same = 0
    blocks = 0
    for name in sorted(a & b):
        with open(os.path.join(args.before, name), encoding="utf-8") as f:
            before = f.read()
        with open(os.path.join(args.after, name), encoding="utf-8") as f:
            after = f.read()
        ir_before, ir_after, names, only = common_ir(before, after)
        blocks += sum(len(x) for x in ir_before)
        if only:
            one_sided.append(f"{name}: {', '.join(only)}")
        if ir_before == ir_after:
            same += 1
            continue
        path, config = rerun_target(name, args.source)
        if path and args.minivm_after and any(
                common_ir(before, dump_one(args.minivm_after, path, config, args.timeout))[:2]
                == common_ir(before, before)[:2] for _ in range(args.reruns)):
            rerun_same.append(name)
            continue
        if path and args.minivm and any(
                common_ir(before, dump_one(args.minivm, path, config, args.timeout))[:2]
                != common_ir(before, before)[:2] for _ in range(args.reruns)):
            unstable.append(name)
            continue
        diff = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                            "before/" + name, "after/" + name, n=2))
        failures.append(diff[:4000])
    print(f"{same} of {len(a & b)} dumps identical in every function both compiled "
          f"({blocks} function IR blocks compared)")
    for entry in one_sided:
        print(f"compiled in one run only (timing, not compared): {entry}")
    for name in rerun_same:
        print(f"identical on a rerun of the after build (its IR varies with timing): {name}")
    for name in unstable:
        print(f"varies from run to run on its own (not compared): {name}")
    if failures:
        sys.exit("FAIL: the IR differs:\n" + "\n".join(failures))
    print("PASS: the generated IR is identical")


def rerun_target(name, source_root):
    stem, config, _ = name.rsplit(".", 2)
    path = os.path.join(source_root, stem.replace("__", os.sep))
    return (path, config) if os.path.isfile(path) and config in CONFIGS else (None, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--minivm", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--jobs", type=int, default=2)
    d.add_argument("--timeout", type=float, default=120)
    d.add_argument("paths", nargs="+")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--minivm", help="the before build, to rerun dumps that differ")
    c.add_argument("--minivm-after", help="the after build, to rerun dumps that differ")
    c.add_argument("--source", default=".", help="where the dumped paths are relative to")
    c.add_argument("--timeout", type=float, default=120)
    c.add_argument("--reruns", type=int, default=3)
    args = ap.parse_args()
    cmd_dump(args) if args.command == "dump" else cmd_compare(args)


if __name__ == "__main__":
    main()
