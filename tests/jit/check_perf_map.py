#!/usr/bin/env python3
"""--perf-map writes Linux perf's JIT map for every compiled function.

  check_perf_map.py --minivm build/bin/minivm

Checks, as a user would meet them:
 1. `--jit=eager --perf-map` (the default file /tmp/perf-PID.map, PID being
    minivm's own): every line is `START SIZE name` in hex, sizes are not 0,
    ranges do not overlap, and every function `--verbose:jit` reports as
    compiled or optimised (name and address) starts a range named
    `minivm:NAME (FILE:LINE)` with the line of its `fn`; the only other
    ranges are the JIT's 14 trampolines between compiled code's two entries
    (docs/jit.md, "Calls"), `minivm:enter_optimised.N` and
    `minivm:enter_quick.N` for N in 0..6.
 2. `--jit=auto` (compiled in the background while the program runs): the
    same for the functions compiled by the time it exits.
 3. `--perf-map=FILE` writes FILE instead.
 4. `--jit=off --perf-map`: nothing is compiled, no map is written.
 5. Mistakes: an unwritable file (exit code 1, an option this machine
    cannot honour) and an empty `--perf-map=` (2, malformed) each give one
    line on stderr, before the program runs.
 6. The real reader: `perf record` + `perf report` name the compiled hot
    function `minivm:spin` (skipped, saying why, where perf cannot record).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import checker, verdict, write_program  # noqa: E402 (tests/checklib.py)

PROGRAM = """\
class Box { v }
fn add(a, b) { return a + b; }
fn mix(x) { return (x ^ (x << 3)) & 0xffff; }

fn make(n) {
  var b = null;
  for (var i = 0; i < n; i = i + 1) { b = new Box(add(i, 1)); }
  return b;
}
fn spin(n) {
  var acc = 0;
  for (var i = 0; i < n; i = i + 1) { acc = mix(acc + i); }
  return acc;
}
fn main() {
  var n = 3000;
  if (len(args()) > 0) { n = int(args()[0]); }
  print(make(n).v, spin(n));
}
"""
# <globals> is the global initialiser (line 1 when the program has none).
FN_LINES = {"add": 2, "mix": 3, "make": 5, "spin": 10, "main": 15, "<globals>": 1}
# A function's code, at either tier: eager's quick code ("compiled") may be
# followed by its optimised code ("optimised") once it is hot, which under a
# slow build can happen before the program ends; each is a range of its own.
COMPILED = re.compile(r"^\[jit\] (compiled|optimised) (\S+) \(.*\) in [0-9.]+ms at (0x[0-9a-f]+)$")
MAP_LINE = re.compile(r"^([0-9a-f]+) ([0-9a-f]+) (.+)$")

failures = []
check = checker(failures)


def run(cmd, **kw):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    out, err = p.communicate(timeout=300)
    return p.pid, p.returncode, out, err


def parse_map(path, label):
    ranges = []
    with open(path) as f:
        for line in f:
            m = MAP_LINE.match(line.rstrip("\n"))
            check(m is not None, f"{label}: malformed map line {line!r}")
            if m:
                ranges.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    check(ranges, f"{label}: empty map")
    for start, size, name in ranges:
        check(size > 0, f"{label}: empty range for {name}")
    ordered = sorted(ranges)
    for (s1, n1, a), (s2, _, b) in zip(ordered, ordered[1:]):
        check(s1 + n1 <= s2, f"{label}: {a} [{s1:x}, +{n1:x}) overlaps {b} at {s2:x}")
    return ranges


def check_compiled_in_map(err, ranges, program_path, label, expect_all):
    code = []  # (function, address), one per compilation at either tier
    for line in err.splitlines():
        m = COMPILED.match(line)
        if m:
            code.append((m.group(2), int(m.group(3), 16)))
    compiled = {fn for fn, _ in code}
    if expect_all:
        check(compiled == set(FN_LINES), f"{label}: compiled {sorted(compiled)}")
    check(compiled, f"{label}: nothing compiled")
    by_start = {start: (size, name) for start, size, name in ranges}
    for fn, address in code:
        want = f"minivm:{fn} ({program_path}:{FN_LINES[fn]})"
        check(address in by_start, f"{label}: {fn} at {address:x} starts no range")
        if address in by_start:
            check(by_start[address][1] == want, f"{label}: {by_start[address][1]!r} != {want!r}")
    trampolines = sorted(name for _, _, name in ranges if name.startswith("minivm:enter_"))
    want_trampolines = sorted(f"minivm:enter_{kind}.{n}" for kind in ("optimised", "quick")
                              for n in range(7))
    check(trampolines == want_trampolines, f"{label}: trampolines {trampolines}")
    check(len(ranges) == len(code) + len(want_trampolines),
          f"{label}: {len(ranges)} ranges for {len(code)} compilations and the trampolines")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prog = write_program(tmp, "prog.mv", PROGRAM)

        # 1. The default file, under --jit=eager.
        pid, rc, out, err = run([args.minivm, "--jit=eager", "--verbose:jit", "--perf-map", prog])
        default_map = f"/tmp/perf-{pid}.map"
        check(rc == 0 and out.split() == ["3000", str(EXPECTED_SPIN[3000])],
              f"eager: rc={rc} out={out!r} err={err!r}")
        check(os.path.exists(default_map), f"eager: {default_map} not written")
        if os.path.exists(default_map):
            ranges = parse_map(default_map, "eager")
            check_compiled_in_map(err, ranges, prog, "eager", expect_all=True)
            os.unlink(default_map)

        # 2. and 3. Tiered compilation (--jit-sync, so the functions are
        # compiled by the time the program ends), to a named file.
        named = os.path.join(tmp, "named.map")
        _, rc, out, err = run([args.minivm, "--jit=auto", "--jit-threshold=50", "--jit-sync",
                               "--verbose:jit",
                               f"--perf-map={named}", prog, "20000"])
        check(rc == 0, f"auto: rc={rc} err={err!r}")
        check(os.path.exists(named), "auto: named map not written")
        if os.path.exists(named):
            ranges = parse_map(named, "auto")
            check_compiled_in_map(err, ranges, prog, "auto", expect_all=False)

        # 4. No JIT, no map.
        pid, rc, out, err = run([args.minivm, "--jit=off", "--perf-map", prog])
        check(rc == 0, f"off: rc={rc} err={err!r}")
        check(not os.path.exists(f"/tmp/perf-{pid}.map"), "off: a map was written")

        # 5. Mistakes.
        for bad, code, text in [(os.path.join(tmp, "no", "such", "dir.map"), 1, "cannot write"),
                                (tmp, 1, "cannot write"), ("", 2, "expected a file")]:
            _, rc, out, err = run([args.minivm, "--jit=eager", f"--perf-map={bad}", prog])
            lines = err.splitlines()
            check(rc == code and out == "" and len(lines) == 1 and text in lines[0],
                  f"--perf-map={bad!r}: rc={rc} out={out!r} err={err!r}")

        # 6. perf itself.
        perf = shutil.which("perf")
        data = os.path.join(tmp, "perf.data")
        why_not = None
        if perf is None:
            why_not = "perf not installed"
        else:
            rec = subprocess.run([perf, "record", "-q", "-o", data, "--", args.minivm,
                                  "--jit=eager", "--perf-map", prog, "3000000"],
                                 capture_output=True, text=True, timeout=300)
            if rec.returncode != 0 or not os.path.exists(data):
                why_not = f"perf record failed: {rec.stderr.strip()[:200]}"
        if why_not:
            print("SKIP perf report check:", why_not)
        else:
            rep = subprocess.run([perf, "report", "-i", data, "--stdio", "--sort", "sym"],
                                 capture_output=True, text=True, timeout=300)
            check("minivm:spin" in rep.stdout or "minivm:mix" in rep.stdout,
                  "perf report names no compiled function:\n" + rep.stdout[-2000:])
            for line in rep.stdout.splitlines():
                if "minivm:" in line:
                    print("perf report:", line.strip())
            # perf record's own child had its own PID: remove its map.
            for name in os.listdir("/tmp"):
                path = os.path.join("/tmp", name)
                if name.startswith("perf-") and name.endswith(".map"):
                    try:
                        with open(path) as f:
                            if f"({prog}:" in f.read():
                                os.unlink(path)
                    except OSError:
                        pass
    return verdict(failures, "perf map checks passed")


def spin_result(n):
    acc = 0
    for i in range(n):
        x = acc + i
        acc = (x ^ (x << 3)) & 0xFFFF
    return acc


EXPECTED_SPIN = {3000: spin_result(3000)}

if __name__ == "__main__":
    sys.exit(main())
