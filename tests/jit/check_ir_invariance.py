#!/usr/bin/env python3
"""The JIT's allocation sequence does not depend on sampling (JEP 331's claim).

Runs one program three times under --jit=eager --print-jit: without an
agent, with the alloccount agent sampling every allocation (interval 0), and
with it at a 512 KiB interval. The IR of `make` (objects, `new`) and of
`blobs` (arrays, `bytes(n)`) must be the same text in all three runs once
absolute addresses (which ASLR moves) are masked, and each must have the
inline TLAB fast path: a load of the TLAB top, an add of the object size, an
unsigned compare with current_end, a store of the new top and of the class
pointer, the zeroing of the rest (a memset: TLABs are not zeroed in advance),
and a call into the runtime only on the slow path. No symbol of the
sampler appears in it.

  check_ir_invariance.py --minivm build/bin/minivm \
      --agent build/tests/agents/liballoccount.so
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import write_program  # noqa: E402 (tests/checklib.py)

PROGRAM = """
class Pair { a, b }
fn make(n) {
  var last = null;
  for (var i = 0; i < n; i = i + 1) { last = new Pair(i, last); }
  return last;
}
fn blobs(n) {
  var last = null;
  for (var i = 0; i < n; i = i + 1) { last = bytes(24); }
  return last;
}
fn main() {
  var p = make(20000);
  print(p.a);
  print(len(blobs(20000)));
}
"""
PAIR_SIZE = 32  # header 16 + 2 fields
BYTES_SIZE = 48  # header 16 + length word 8 + 24 bytes


def run(minivm, agent_args, path):
    cmd = [minivm, *agent_args, "--jit=eager", "--print-jit", path]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or p.stdout.splitlines()[:2] != ["19999", "24"]:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout, p.stderr


def ir_of(name, stderr):
    m = re.search(rf"^; --print-jit: {name}\n(.*?^\}}\n)", stderr, re.M | re.S)
    if not m:
        sys.exit(f"FAIL: no IR for {name} in stderr:\n{stderr[:2000]}")
    # Absolute addresses (classes, code, caches) differ from run to run.
    return re.sub(r"\b\d{9,}\b", "ADDR", m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm", required=True)
    ap.add_argument("--agent", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = write_program(tmp, "pairs.mv", PROGRAM)
        _, off = run(args.minivm, [], path)
        out0, every = run(args.minivm, [f"-agentpath:{args.agent}=interval=0"], path)
        _, sparse = run(args.minivm, [f"-agentpath:{args.agent}=interval=524288"], path)

    # The sampled run really sampled every Pair and Bytes through that code.
    for want in (f"Pair {PAIR_SIZE} 20000", f"Bytes {BYTES_SIZE} 20000", "PASS alloccount"):
        if want not in out0:
            sys.exit(f"FAIL: the interval-0 run did not sample every allocation ({want!r}):\n"
                     f"{out0}")

    failures = []
    # make adds Pair's constant size; blobs computes the size from the length
    # (bytes(24): 24 + header 24 + 7, rounded down to a multiple of 8).
    for name, size, slow_path in (("make", PAIR_SIZE, "minivm_jit_new"),
                                  ("blobs", 24 + 7, "minivm_jit_builtin")):
        ir_off, ir_every, ir_sparse = ir_of(name, off), ir_of(name, every), ir_of(name, sparse)
        if not (ir_off == ir_every == ir_sparse):
            import difflib
            diff = "".join(difflib.unified_diff(ir_off.splitlines(True), ir_every.splitlines(True),
                                                "sampling off", "interval 0"))
            sys.exit(f"FAIL: the IR of {name} depends on sampling:\n{diff}")
        checks = [
            (r"load i64, ptr %thread, align 8", "a load of the TLAB top (offset 0 of the thread)"),
            (rf"add i64 %\w+, {size}\b", "an add of the object size"),
            (r"store ptr inttoptr \(i64 ADDR to ptr\), ptr %\w+, align 8", "a store of the class"),
            (r"icmp ugt i64", "an unsigned compare with current_end"),
            (r"store i64 %\w+, ptr %thread, align 8", "a store of the new top"),
            (r"call void @llvm\.memset\.p0\.i64\(ptr [^,]*, i8 0, i64 %?\w+",
             "the zeroing of the gc word and body (a TLAB is not zeroed in advance)"),
            (rf"call \w+ @{slow_path}\(", "the runtime slow path"),
        ]
        for pattern, what in checks:
            if not re.search(pattern, ir_off):
                failures.append(f"{name}: missing {what} ({pattern})")
        calls = set(re.findall(r"call \w+ @([\w.]+)\(", ir_off))
        unexpected = {c for c in calls
                      if not c.startswith("minivm_jit_") and not c.startswith("llvm.")}
        if unexpected:
            failures.append(f"{name}: unexpected calls: {sorted(unexpected)}")
        if re.search(r"sampl", ir_off, re.I):
            failures.append(f"{name}: the IR mentions sampling")
        if failures:
            sys.exit("FAIL:\n  " + "\n  ".join(failures) + "\n" + ir_off)
        print(f"PASS: {name}'s IR ({len(ir_off.splitlines())} lines) is identical with sampling "
              f"off, at interval 0 and at 512 KiB; calls: {sorted(calls)}")


if __name__ == "__main__":
    main()
