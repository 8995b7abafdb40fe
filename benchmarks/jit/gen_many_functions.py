#!/usr/bin/env python3
"""Writes a program of N trivial functions, for the JIT's start-up cost.

  gen_many_functions.py N > many.mv
  /usr/bin/time -f '%U user %S sys %e wall' build/bin/minivm --jit=eager many.mv

Functions f0..f(N-1) are `fn fI(x) { return x + I; }`; main prints "main"
at once, calls 100 of them spread over the range and prints the sum. Under
--jit=eager every function is compiled before main runs, so nearly all of
the run's CPU time is compile time. docs/performance.md, "JIT tier", 6.
"""
import sys

n = int(sys.argv[1])
out = [f"fn f{i}(x) {{ return x + {i}; }}" for i in range(n)]
out += ["fn main() {", '  print("main");', "  var s = 0;"]
out += [f"  s = s + f{i}(1);" for i in range(0, n, max(1, n // 100))]
out += ["  print(s);", "}"]
sys.stdout.write("\n".join(out) + "\n")
