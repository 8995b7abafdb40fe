"""Helpers shared by the standalone check scripts of ctest
(tests/jit/check_*.py, tests/layering/check_layering.py): each reports every
failure on its own line, goes on checking, and ends with one verdict line
and its exit code."""
import os


def checker(failures):
    """A check(cond, what) that records `what` in `failures` and prints it
    when cond is false (the script runs on, to report every failure)."""
    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)
    return check


def verdict(failures, passed, failed="check(s) failed"):
    """Prints `N <failed>` if there are failures, else `passed`; returns the
    exit code (1 or 0)."""
    if failures:
        print(f"{len(failures)} {failed}")
        return 1
    print(passed)
    return 0


def write_program(directory, name, source):
    """Writes a program's source to directory/name and returns its path."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(source)
    return path
