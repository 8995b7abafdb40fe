#!/usr/bin/env python3
"""A program with very many functions runs in every JIT mode, and the JIT
never aborts or floods stderr (docs/jit.md, "Scaling and limits").

  check_many_functions.py --minivm build/bin/minivm [--functions N]

Generates a program of N small functions (default 3000: six eager batches,
so every compiler thread of a 2- to 6-core machine compiles and links some
concurrently) whose main calls every one of them, and checks:
 1. --jit=eager, --jit=auto and --jit=off print the same, right answer,
    exit 0 and write nothing to stderr; under eager with --verbose:jit,
    every function is compiled, one line each (main, once it is more than
    8000 bytes of bytecode, says it stays interpreted instead).
 2. With --jit-memory far too small for the program, --jit=eager still
    gives the right answer, every function that did not fit is one
    `not compiled, stays interpreted: JIT memory limit reached` line under
    --verbose:jit, there is no other stderr output (no "JIT session
    error"), and without --verbose:jit stderr is empty. With a cap too
    small even for the JIT's trampolines (--jit-memory=1), every function
    stays interpreted with that reason, and the answer is the same.
 3. A malformed --jit-memory is one line and exit code 2.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import checker, verdict, write_program  # noqa: E402 (tests/checklib.py)

failures = []
check = checker(failures)


def program(n):
    lines = [f"fn f{i}(x) {{ return x + {i % 7}; }}" for i in range(n)]
    lines.append("fn main() {")
    lines.append("  var s = 0;")
    lines += [f"  s = f{i}(s);" for i in range(n)]
    lines.append("  print(s);")
    lines.append("}")
    return "\n".join(lines) + "\n", sum(i % 7 for i in range(n))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm", required=True)
    ap.add_argument("--functions", type=int, default=3000)
    args = ap.parse_args()
    n = args.functions
    source, expected = program(n)
    print(f"{n} functions")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_program(tmp, "many.mv", source)
        want = f"{expected}\n"
        for mode in ("eager", "auto", "off"):
            rc, out, err = run([args.minivm, f"--jit={mode}", path])
            check(rc == 0 and out == want and err == "",
                  f"--jit={mode}: rc={rc} out={out[:200]!r} err={err[:500]!r}")
        # Every f and <globals> compiled, one line each; main too big.
        rc, out, err = run([args.minivm, "--jit=eager", "--verbose:jit", path])
        lines = err.splitlines()
        compiled = [l for l in lines if l.startswith("[jit] compiled ")]
        too_big = [l for l in lines if l.startswith("[jit] main: stays interpreted: ")]
        # main's calls of the small f's are inlined, within a budget.
        inlined = [l for l in lines if re.match(r"\[jit\] main: inlined f\d+ \(line \d+\)$", l)]
        check(rc == 0 and out == want and len(too_big) <= 1 and
              len(compiled) + len(too_big) == len(lines) - len(inlined) == n + 2,
              f"eager verbose: rc={rc} {len(compiled)} compiled lines of "
              f"{len(err.splitlines())}: {err[-500:]!r}")

        # 2. Memory limit far below what the program needs.
        rc, out, err = run([args.minivm, "--jit=eager", "--jit-memory=64k", "--verbose:jit", path])
        lines = err.splitlines()
        refused = [l for l in lines if "not compiled, stays interpreted: JIT memory limit reached" in l]
        compiled = [l for l in lines if l.startswith("[jit] compiled ")]
        check(rc == 0 and out == want, f"capped: rc={rc} out={out[:200]!r} err={err[-500:]!r}")
        too_big = [l for l in lines if l.startswith("[jit] main: stays interpreted: ")]
        check(refused and len(refused) + len(compiled) + len(too_big) == len(lines) == n + 2,
              f"capped: {len(refused)} refused + {len(compiled)} compiled of {len(lines)} lines, "
              f"{n + 2} functions: {err[-800:]!r}")
        rc, out, err = run([args.minivm, "--jit=eager", "--jit-memory=64k", path])
        check(rc == 0 and out == want and err == "", f"capped quiet: rc={rc} err={err[-500:]!r}")
        rc, out, err = run([args.minivm, "--jit=eager", "--jit-memory=1", "--verbose:jit", path])
        lines = err.splitlines()
        no_trampolines = [l for l in lines if re.match(
            r"\[jit\] \S+: not compiled, stays interpreted: the JIT's trampolines could not be "
            r"linked: JIT memory limit reached \(--jit-memory=1 bytes, 0 in use, \d+ more needed\)$",
            l)]
        too_big = [l for l in lines if l.startswith("[jit] main: stays interpreted: ")]
        check(rc == 0 and out == want and
              len(no_trampolines) + len(too_big) == len(lines) == n + 2,
              f"no room for the trampolines: rc={rc} {len(no_trampolines)} of {len(lines)} "
              f"lines: {err[-800:]!r}")

        # 3. Mistakes.
        for bad in ("--jit-memory=", "--jit-memory=lots", "--jit-memory=0"):
            rc, out, err = run([args.minivm, bad, path])
            check(rc == 2 and out == "" and len(err.splitlines()) == 1 and "--jit-memory" in err,
                  f"{bad}: rc={rc} err={err!r}")
    return verdict(failures, "many-functions checks passed")


if __name__ == "__main__":
    sys.exit(main())
