#!/usr/bin/env python3
"""Tests of the tool agents (heapprof, leakcheck, lifetimes): stdlib only.

Two hosts run the agents:
  - fake_vm (tests/tools/fake_vm.cc): a deterministic stand-in VM with a
    scripted workload whose truth it prints; golden outputs, statistics and
    lifecycles are checked there, independently of the interpreter;
  - minivm itself, on the .mv programs of this folder and examples/programs.
    If this minivm cannot load agents yet, those tests are skipped with a
    message (they are not counted as passed).

pprof output is checked three ways: a small protobuf decoder (profiles.py,
always), `go tool pprof` (-raw, -top, -traces, -lines, -tagfocus, -diff_base;
skipped with a message if `go` is not installed: scripts/setup.sh installs
golang-go) and the HTTP endpoint, fetched with urllib while a program runs.

Statistical checks use fixed seeds (printed) and 5.7-sigma bounds with sigma
from the Horvitz-Thompson variance of docs/sampling.md.

The tests live in suites/, one file per subject; harness.py runs them,
tool_helpers.py and profiles.py are what several suites share. A new test:
a function decorated with its suite's `@test`, named for what it checks.

  run_tool_tests.py --minivm build/bin/minivm --fake-vm build/.../tools_fake_vm \\
      --unit build/.../tools_unit_checks --heapprof build/bin/libheapprof.so \\
      --leakcheck build/bin/libleakcheck.so --lifetimes build/bin/liblifetimes.so \\
      [--work DIR] [--update-golden] [-k SUBSTRING]

The last line of output is `N passed, M failed`.
"""
import argparse
import sys

from harness import (C, add_path_options, find_go, run_tests, take_paths,
                     use_tsan_suppressions, work_dir)
from suites import fake_vm, http, leakcheck_lifetimes, signals, vm
from tool_helpers import probe_vm

# In this order: the fake VM's tests first, which need no working minivm.
TESTS = [*fake_vm.TESTS, *vm.TESTS, *http.TESTS, *signals.TESTS, *leakcheck_lifetimes.TESTS]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minivm")
    add_path_options(ap, "fake_vm", "unit", "heapprof", "leakcheck", "lifetimes")
    ap.add_argument("--test-agents", help="the build's tests/agents folder (deathwait, ordering)")
    ap.add_argument("--work")
    ap.add_argument("--update-golden", action="store_true")
    ap.add_argument("--full-sweep", action="store_true",
                    help="leakcheck's false-positive sweep over 20 seeds (the Release build)")
    ap.add_argument("-k", action="append", help="only tests whose name contains this")
    a = ap.parse_args()
    take_paths(C, a, "minivm", "fake_vm", "unit", "heapprof", "leakcheck", "lifetimes",
               "test_agents")
    C.update_golden = a.update_golden
    C.full_sweep = a.full_sweep
    C.work = work_dir(a.work, "tool_tests_")
    C.go = find_go()
    use_tsan_suppressions()
    probe_vm()
    print(f"tool tests: work dir {C.work}; go: {C.go or 'not installed'}; "
          f"minivm agents: {'yes' if C.vm_ok else 'no (' + C.vm_skip_reason + ')'}")
    return run_tests(TESTS, a.k)


if __name__ == "__main__":
    sys.exit(main())
