"""Helpers for tests of the tool agents (heapprof, leakcheck, lifetimes):
running them under the fake VM or minivm, golden files, option mistakes,
heapprof's HTTP endpoint, and minivm under signals. Shared by the suites of
run_tool_tests.py and by run_attach_tests.py, run_signal_tests.py and
soak_signals.py."""

import html
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

from harness import C, HERE, ROOT, Skip, check, fresh, no_sanitizer_report, path, run
from profiles import by_leaf, check_heap_profile, decode_profile, pprof


GOLDEN = os.path.join(HERE, "golden")


def agent(name, opts=""):
    path = getattr(C, name)
    return f"-agentpath:{path}" + (f"={opts}" if opts else "")


def fake(workload, agents, seed=1, scale=1, extra=(), timeout=300):
    cmd = [C.fake_vm, f"--workload={workload}", f"--seed={seed}", f"--scale={scale}", *extra,
           *agents]
    return run(cmd, timeout=timeout)


def truth_of(stdout):
    return {t["site"]: t for t in (json.loads(l) for l in stdout.splitlines()
                                    if l.startswith('{"truth"'))}


def need_vm():
    if not C.vm_ok:
        raise Skip(C.vm_skip_reason)


def vm(args, timeout=300, seed=None, opts=()):
    cmd = [C.minivm, *opts]
    if seed is not None:
        cmd.append(f"--seed={seed}")
    return run(cmd + list(args), timeout=timeout)


def golden(name, actual):
    p = os.path.join(GOLDEN, name)
    if C.update_golden:
        os.makedirs(GOLDEN, exist_ok=True)
        with open(p, "w") as f:
            f.write(actual)
        return
    if not os.path.exists(p):
        raise Skip(f"no golden file {os.path.relpath(p, ROOT)}; run with --update-golden")
    with open(p) as f:
        want = f.read()
    if want != actual:
        import difflib
        diff = "".join(difflib.unified_diff(want.splitlines(True), actual.splitlines(True),
                                            "golden/" + name, "actual"))
        raise AssertionError(f"differs from golden/{name}:\n{diff[:4000]}")


def agent_lines(stderr, name):
    return "".join(l + "\n" for l in stderr.splitlines() if l.startswith(name + ":"))


# ---- what an HTTP profile of a running host must hold ------------------------------------

def http_checks(run_, expect_leaf):
    time.sleep(1.0)  # let some samples accumulate
    st, hdr, body = run_.fetch("/debug/pprof/heap")
    check(st == 200 and body[:2] == b"\x1f\x8b", f"heap: status {st}")
    prof = decode_profile(body)
    check_heap_profile(prof, "inuse_space")
    check(any(expect_leaf in k for k in by_leaf(prof, 1)), f"leaves {by_leaf(prof, 1)}")
    st, hdr, body = run_.fetch("/debug/pprof/allocs")
    check_heap_profile(decode_profile(body), "alloc_space")
    st, hdr, body = run_.fetch("/debug/pprof/heap?debug=1")
    check(st == 200 and body.startswith(b"heap profile: ") and
          hdr["Content-Type"] == "text/plain; charset=utf-8", f"debug=1: {body[:200]!r}")
    check(any(expect_leaf in k for k in parse_legacy(body.decode())), body.decode()[:2000])
    try:
        run_.fetch("/nope")
        raise AssertionError("want 404")
    except urllib.error.HTTPError as e:
        check(e.code == 404, f"status {e.code}")
    http_index_links(run_)
    if C.go:
        url = f"http://127.0.0.1:{run_.port}/debug/pprof"
        fn = expect_leaf.split()[0]
        top = pprof(["-top", f"{url}/heap"])
        check("Type: inuse_space" in top and fn in top, top)
        top = pprof(["-top", f"{url}/allocs"])
        check("Type: alloc_space" in top, top)
        # (What survives a collection may be too small to hold a sample:
        # vm_http_gc_runs_a_collection checks the values.)
        top = pprof(["-top", f"{url}/heap?gc=1"])
        check("Type: inuse_space" in top, top)
        # The legacy text has addresses only: pprof names them by POSTing them
        # to /debug/pprof/symbol.
        top = pprof(["-top", "-sample_index=alloc_space", f"{url}/allocs?debug=1"])
        check("Type: alloc_space" in top and fn in top, top)
    else:
        print("    (go not installed: `go tool pprof URL` not checked)")


# ---- bad options, under both hosts ------------------------------------------------------------

BAD = {
    "heapprof": ["interval=abc", "interval=-5", "format=svg", "http=70000", "depth=0",
                 "threads=main+++x", "dump_every=0", "bogus=1", "space=x", "top=-1"],
    "leakcheck": ["interval=1q", "every=-1", "confidence=2", "depth=x", "gc_every=1x", "nope",
                  "paths=maybe", "path_objects=0", "path_seconds=x"],
    "lifetimes": ["interval=", "top=0", "trace=", "x=1"],
}


def check_bad(host_cmd, name, opt):
    r = run(host_cmd(agent(name, opt)), timeout=60)
    check(r.returncode != 0, f"{name}={opt}: exit code 0")
    lines = [l for l in r.stderr.splitlines() if l.startswith(name + ":")]
    key = opt.split("=")[0]
    check(len(lines) == 1 and f"'{key}" in lines[0],
          f"{name}={opt}: want one line naming '{key}', got:\n{r.stderr}")


# A small young generation: liveness is only known at collections, and the
# default young generation (a third of 1 GiB) would give these short programs
# none (leakcheck forces full collections of its own; lifetimes does not).
SMALL_YOUNG = ["--young=2m"]


# ---- heapprof's live endpoint: Go's net/http/pprof forms, HTTP behaviour ------
# (examples/agents/heapprof/pprof_http.h, http_server.h)

def parse_legacy(text):
    """Go's legacy heap text (runtime/pprof debug=1) as heapprof writes it:
    {leaf "fn file:line": [inuse_objects, inuse_bytes, alloc_objects, alloc_bytes]},
    summed per leaf frame (named by the '#' line after each sample)."""
    lines = text.splitlines()
    check(re.fullmatch(r"heap profile: \d+: \d+ \[\d+: \d+\] @ heapprofile", lines[0]),
          f"header {lines[0]!r}")
    out, values = {}, None
    for line in lines[1:]:
        m = re.fullmatch(r"(\d+): (\d+) \[(\d+): (\d+)\] @( 0x[0-9a-f]+)+", line)
        if m:
            values = [int(m.group(i)) for i in range(1, 5)]
            continue
        m = re.fullmatch(r"#\t0x[0-9a-f]+\t(\S+)\t(\S+)", line)
        if m and values is not None:
            leaf = out.setdefault(f"{m.group(1)} {m.group(2)}", [0, 0, 0, 0])
            for i in range(4):
                leaf[i] += values[i]
            values = None
    return out


def read_reply(s):
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except ConnectionResetError:
        pass
    if not got:
        return 0, {}, b""
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


def http_index_links(run_):
    st, hdr, body = run_.fetch("/debug/pprof/")
    check(st == 200 and hdr["Content-Type"] == "text/html; charset=utf-8", f"index: {st}")
    text = body.decode()
    links = [html.unescape(h) for h in re.findall(r"href='([^']*)'", text)]
    for want in ("heap", "allocs", "heap?debug=1", "allocs?debug=1", "heap?gc=1&debug=1"):
        check(want in links, f"index links {links}")
    counts = re.findall(r"<tr><td>(\d+)</td><td><a href='(\w+)\?debug=1'>(\w+)</a>", text)
    check(sorted(c[2] for c in counts) == ["allocs", "heap"] and all(int(c[0]) > 0 for c in counts),
          f"index table {counts}")
    for link in links:  # relative to the index
        st, _, body = run_.fetch("/debug/pprof/" + link)
        check(st == 200 and body, f"{link}: {st}")
    # /debug/pprof redirects there (urllib follows it).
    with urllib.request.urlopen(f"http://127.0.0.1:{run_.port}/debug/pprof", timeout=20) as r:
        check(r.status == 200 and r.url.endswith("/debug/pprof/"), r.url)


def comments_of(p):
    """The profile's comments, read by `go tool pprof -comments` (the real reader)."""
    return pprof(["-comments", p]).splitlines()


# ---- minivm: ending by SIGINT / SIGTERM (docs/tools.md, "Stopping a profiled program") ----
#
# Real signals to a real minivm. A test waits for a sign that the program is
# where the test needs it (a `[gc]` line of --verbose:gc: the program is in
# its allocation loop, its output is buffered; an agent's line: VMDeath has
# begun), never for a fixed time; the time limits only catch hangs.

def _default_signal_actions():
    # A signal ignored by our parent (a runner started with `&` from a
    # script) stays ignored in minivm, by design: give the child defaults.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class Signalled:
    """minivm with stdout and stderr in files (so stdout is block-buffered,
    as for a user's `> out.txt`), for sending it signals."""

    def __init__(self, args, name, preexec=_default_signal_actions, stdin=subprocess.DEVNULL):
        self.out, self.err = fresh(f"{name}.out"), fresh(f"{name}.err")
        with open(self.out, "w") as o, open(self.err, "w") as e:
            self.p = subprocess.Popen([C.minivm, *args], stdin=stdin, stdout=o, stderr=e,
                                      cwd=C.work, preexec_fn=preexec)
        self.cmd = " ".join([C.minivm, *args])

    def stdout(self):
        with open(self.out) as f:
            return f.read()

    def stderr(self):
        with open(self.err) as f:
            return f.read()

    def wait_for(self, pattern, count=1, timeout=300, exit_ok=False):
        """Waits until stderr has `count` matches of `pattern` (or the process
        exited, if exit_ok)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(re.findall(pattern, self.stderr())) >= count:
                return
            if self.p.poll() is not None:
                if exit_ok:
                    return
                break
            time.sleep(0.02)
        self.p.kill()
        self.p.wait()
        raise AssertionError(f"{self.cmd}: no {count} x /{pattern}/ on stderr (exit code "
                             f"{self.p.returncode}):\n{self.stderr()[-3000:]}")

    def wait_signals_blocked(self, timeout=60):
        """Waits until minivm's main thread blocks SIGINT and SIGTERM, i.e.
        its signal dispatcher is running (/proc/PID/status, SigBlk)."""
        want = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open(f"/proc/{self.p.pid}/status") as f:
                    blk = next(int(l.split()[1], 16) for l in f if l.startswith("SigBlk:"))
                if blk & want == want:
                    return
            except (OSError, StopIteration):
                pass
            time.sleep(0.01)
        raise AssertionError(f"{self.cmd}: SIGINT and SIGTERM never blocked")

    def send(self, sig):
        self.p.send_signal(sig)

    def finish(self, timeout=300):
        try:
            code = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError(f"{self.cmd}: did not end within {timeout} s:\n"
                                 f"{self.stderr()[-3000:]}")
        no_sanitizer_report(self.stderr(), self.cmd)
        return code
# Collections that show the program is in its allocation loop. With
# --young=1m, ten of them are ~10 MB allocated: at the default 512 KiB
# interval that many samples (the seed is fixed), so the site is in the
# profile.
GC_LINE = r"\[gc\] "
SIGNAL_OPTS = ["--young=1m", "--verbose:gc", "--seed=1"]


def need_test_agent(name):
    lib = os.path.join(C.test_agents or "", f"lib{name}.so")
    if not C.test_agents or not os.path.exists(lib):
        raise Skip(f"no {lib} (give --test-agents DIR, the build's tests/agents folder)")
    return f"-agentpath:{lib}"


def check_forever_stdout(r, what):
    want = "".join(f"line {i}\n" for i in range(1000))
    got = r.stdout()
    check(got == want, f"{what}: stdout not flushed whole: {len(got)} bytes, ends "
                       f"{got[-40:]!r}")


# ---- can this minivm load agents? ------------------------------------------------------------

def probe_vm():
    C.vm_ok = False
    if not C.minivm or not os.path.exists(C.minivm):
        C.vm_skip_reason = "no minivm given"
        return
    prog = os.path.join(ROOT, "examples", "programs", "hello.mv")
    r = run([C.minivm, agent("heapprof", "file=,top=0"), prog], timeout=60)
    if r.returncode == 0:
        C.vm_ok = True
    else:
        C.vm_skip_reason = ("this minivm cannot run agents yet: " +
                            (r.stderr.strip().splitlines() or ["?"])[-1])
