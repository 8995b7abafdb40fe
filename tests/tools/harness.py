"""The tool-test harness: what every runner of tests/tools and tests/collector
shares, whatever it tests.

  - a test registry (`TESTS, test = test_registry()`, then `@test` on each
    test function) and `run_tests`, which runs them (`-k SUBSTRING` selects),
    prints PASS / FAIL / SKIP lines and ends with `N passed, M failed`;
  - `C`, the runner's context (paths given on the command line, the work
    folder), and the runner set-up (`add_path_options`, `take_paths`,
    `work_dir`, `find_go`, `use_tsan_suppressions`);
  - running processes: `run` (to the end), `Running` (in the background,
    its stderr read with os.pread while it runs, `wait_for` a pattern);
  - `check`, `Skip`, `fresh` (a clean path in the work folder) and
    `no_sanitizer_report`.

Stdlib only. run_tool_tests.py shows a runner's whole set-up.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class Skip(Exception):
    pass


def test_registry():
    """A runner's own list of tests and the @test decorator that appends to it
    (run_attach_tests.py and run_collector_tests.py keep theirs apart from this
    file's, so importing this module does not run its tests)."""
    tests = []

    def test(fn):
        tests.append(fn)
        return fn
    return tests, test


class Ctx:
    pass


C = Ctx()


# ---- running things ---------------------------------------------------------

def run(cmd, timeout=300, cwd=None, env=None):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, cwd=cwd or C.work, env=env)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def no_sanitizer_report(text, what):
    """Fails if `text` (a process's stderr) holds a sanitizer's report:
    minivm ends with _exit, so a report does not change its exit code."""
    m = re.search(r"^.*(?:Sanitizer|: runtime error: ).*$", text, re.M)
    check(m is None, f"{what}: sanitizer report: {m and m.group(0)}")


def path(name):
    return os.path.join(C.work, name)


def fresh(name):
    p = path(name)
    if os.path.isdir(p):
        shutil.rmtree(p)
    elif os.path.exists(p):
        os.unlink(p)
    return p


# ---- a process running in the background ---------------------------------------------------

def read_shared(f):
    """All of a file a running child writes to, without moving the offset
    the child's writes go to."""
    fd = f.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


class Running:
    """A VM process (fake or real) with heapprof's port parsed from stderr."""

    def __init__(self, cmd, stdin=None):
        self.errf = tempfile.TemporaryFile(mode="w+", dir=C.work)
        self.p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=self.errf,
                                  cwd=C.work)
        self.port = None

    def stderr(self):
        # pread, not seek and read: the child writes through the same open
        # file description (Popen dups it), so the offset is shared, and a
        # seek(0) here made its next write overwrite what it had written
        # (heapprof's "serving" line, lost under the fake VM's "idle" one).
        return read_shared(self.errf)

    def wait_for(self, pattern, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.stderr())
            if m:
                return m
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no /{pattern}/ on stderr:\n{self.stderr()}")

    def wait_port(self):
        m = self.wait_for(r"heapprof: serving http://127\.0\.0\.1:(\d+)/debug/pprof/heap")
        self.port = int(m.group(1))
        return self.port

    def fetch(self, p):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{p}", timeout=20) as r:
            return r.status, r.headers, r.read()

    def finish(self, timeout=120):
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError("process did not finish")
        return self.p.returncode, self.stderr()


def run_tests(tests, only):
    """Runs each test function (only those whose name contains a string of
    `only`, if given), printing PASS, FAIL or SKIP lines and the totals.
    Returns the exit code. Shared with tests/collector/run_collector_tests.py."""
    passed = failed = skipped = 0
    for t in tests:
        if only and not any(k in t.__name__ for k in only):
            continue
        start = time.time()
        try:
            t()
            passed += 1
            print(f"PASS {t.__name__} ({time.time() - start:.1f}s)")
        except Skip as e:
            skipped += 1
            print(f"SKIP {t.__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - every failure is reported, the rest still run
            failed += 1
            detail = str(e) if isinstance(e, AssertionError) else traceback.format_exc()
            print(f"FAIL {t.__name__}: {detail}")
        sys.stdout.flush()
    if skipped:
        print(f"{skipped} skipped (see SKIP lines)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


# ---- runner set-up ---------------------------------------------------------------------------

def add_path_options(ap, *names):
    """Adds a required option per file the runner needs (fake_vm: --fake-vm)."""
    for name in names:
        ap.add_argument("--" + name.replace("_", "-"), required=True)


def take_paths(ctx, args, *names):
    """Sets ctx.NAME to the absolute path given for each option (None if not
    given): the tests run in other folders."""
    for name in names:
        given = getattr(args, name)
        setattr(ctx, name, given and os.path.abspath(given))


def work_dir(given, prefix):
    """The runner's work folder: the one given (made if need be), else a new
    temporary one."""
    work = os.path.abspath(given) if given else tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    return work


def find_go():
    """The `go` binary (golang-go installs it outside PATH on some systems), or None."""
    return shutil.which("go") or next((p for p in ("/usr/lib/go/bin/go", "/usr/bin/go")
                                       if os.path.exists(p)), None)


def use_tsan_suppressions():
    """For TSan builds (ignored otherwise): the suppressions of tsan.supp
    (see the file) for every process the tests start."""
    supp = os.path.join(HERE, "tsan.supp")
    os.environ["TSAN_OPTIONS"] = ":".join(
        o for o in (os.environ.get("TSAN_OPTIONS", ""), f"suppressions={supp}") if o)
