#!/usr/bin/env python3
"""How a profiled minivm ends under signals and broken outputs: real minivm
processes, real signals, real pipes, FIFOs and sockets (docs/language.md
"Exit codes", docs/tools.md "Stopping a profiled program").

  run_signal_tests.py --minivm build/bin/minivm --heapprof build/bin/libheapprof.so \
      --attach build/bin/minivm-attach --test-agents build/tests/agents \
      [--work DIR] [-k SUBSTRING]

  - SIGUSR2 never ends a VM that heapprof ran in: not during VM death, not
    after an attached heapprof's `stop`;
  - SIGPIPE never ends minivm: `minivm prog | head` ends in order, exit 1,
    with VM death and the profile;
  - a signal's end is bounded even when stdout goes to a pipe nobody reads;
  - --perf-map write errors and a FIFO output without a reader are one line
    and exit 1, never silence or a hang;
  - heapprof's endpoint judges Content-Length from the headers: 400 for
    conflicting or malformed ones, 413 for an oversize one, before any body.

Nothing here decides by time: a test waits for a state it can see (a line
on stderr, a full pipe, a signal no longer pending), and time limits only
catch hangs. The last line of output is `N passed, M failed`.
"""
import argparse
import fcntl
import os
import re
import signal
import socket
import subprocess
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (  # noqa: E402 (the shared runner, profile decoder and helpers)
    C, ROOT, Running, Skip, add_path_options, check, find_go, fresh, no_sanitizer_report, run,
    run_tests, take_paths, test_registry, use_tsan_suppressions, work_dir)
from profiles import check_heap_profile, pprof, read_profile  # noqa: E402
from tool_helpers import (  # noqa: E402
    GC_LINE, SIGNAL_OPTS, Signalled, check_forever_stdout, need_test_agent, read_reply)

HERE = os.path.dirname(os.path.abspath(__file__))
FOREVER = os.path.join(HERE, "forever.mv")
PRINTS_FOREVER = os.path.join(HERE, "prints_forever.mv")
HELLO = os.path.join(ROOT, "examples", "programs", "hello.mv")
TESTS, test = test_registry()
# Only catches hangs: every wait below ends on a state, long before this.
HANG = 120


def default_signals():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGPIPE, signal.SIGUSR2):
        signal.signal(s, signal.SIG_DFL)


def heapprof(opts):
    return f"-agentpath:{C.heapprof}={opts}"


def sigusr2_pending(pid):
    """True while SIGUSR2 sent to `pid` waits for a thread to take it."""
    bit = 1 << (signal.SIGUSR2 - 1)
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("ShdPnd:", "SigPnd:")) and int(line.split()[1], 16) & bit:
                    return True
    except OSError:
        return False  # gone
    return False


def send_sigusr2_and_wait_taken(p):
    """Sends SIGUSR2 and waits until a thread has taken it (or the process
    died of it): after this, whatever SIGUSR2 does has been done."""
    p.send_signal(signal.SIGUSR2)
    deadline = time.time() + HANG
    while time.time() < deadline and p.poll() is None and sigusr2_pending(p.pid):
        time.sleep(0.01)
    check(not sigusr2_pending(p.pid) or p.poll() is not None, "SIGUSR2 never taken")


def check_profile(out, what):
    check(os.path.exists(out) and os.path.getsize(out) > 0, f"{what}: no profile {out}")
    check_heap_profile(read_profile(out))
    if C.go:
        pprof(["-top", out])


def describe(code):
    if code is None:
        return "still running"
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}"


# ---- SIGUSR2 and heapprof ---------------------------------------------------

@test
def sigusr2_during_vm_death():
    """SIGUSR2 after heapprof has written its final profile, while the VM is
    still in VM death (deathwait, loaded after it, holds it): the signal is
    handled, not the VM's end (its default action would exit 140)."""
    dw = need_test_agent("deathwait")
    gate = fresh("usr2_gate")
    out = fresh("usr2_death.pb.gz")
    r = Signalled([*SIGNAL_OPTS, heapprof(f"file={out},top=0"), f"{dw}=wait={gate}",
                      FOREVER], "usr2_death", preexec=default_signals)
    r.wait_for(GC_LINE, count=5)
    r.send(signal.SIGTERM)
    r.wait_for(r"deathwait: VMDeath\n")
    r.wait_for(re.escape(f"heapprof: wrote {out}"))
    send_sigusr2_and_wait_taken(r.p)
    open(gate, "w").close()
    got = r.finish(timeout=HANG)
    check(got == 143, f"SIGUSR2 in VM death: {describe(got)}, want 143\n{r.stderr()[-2000:]}")
    check_profile(out, "SIGUSR2 in VM death")
    check_forever_stdout(r, "SIGUSR2 in VM death")


@test
def sigusr2_after_attached_stop():
    """An attached heapprof's `stop` leaves SIGUSR2 handled: a SIGUSR2 then
    is ignored, and the VM ends by SIGTERM as usual."""
    if not C.attach:
        raise Skip("no --attach (minivm-attach)")
    out = fresh("usr2_stop.pb.gz")
    r = Signalled([*SIGNAL_OPTS, FOREVER], "usr2_stop", preexec=default_signals)
    r.wait_for(GC_LINE, count=2)
    env = dict(os.environ, MINIVM_AGENT_PATH=os.path.dirname(C.heapprof))
    for action in (f"heapprof=start,file={out},top=0", "heapprof=stop"):
        a = subprocess.run([C.attach, str(r.p.pid), "load", action], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=HANG, env=env)
        check(a.returncode == 0, f"minivm-attach load {action}: {a.returncode}\n{a.stderr}")
    check_profile(out, "stop")
    send_sigusr2_and_wait_taken(r.p)
    check(r.p.poll() is None, f"SIGUSR2 after stop: {describe(r.p.returncode)}")
    r.send(signal.SIGTERM)
    got = r.finish(timeout=HANG)
    check(got == 143, f"after stop and SIGUSR2: {describe(got)}, want 143\n{r.stderr()[-2000:]}")


# ---- SIGPIPE and a closed stdout --------------------------------------------

@test
def closed_stdout_pipe():
    """`minivm --heap-profile=h.pb.gz prog.mv | head -1`: the print that
    finds the pipe closed ends the VM in order (exit 1, one line saying so),
    with VM death and the whole profile; SIGPIPE would have killed it (141)."""
    out = fresh("pipe.pb.gz")
    err = fresh("pipe.err")
    with open(err, "w") as e:
        p = subprocess.Popen([C.minivm, "--seed=1", f"--heap-profile={out}", PRINTS_FOREVER],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=e,
                             cwd=C.work, preexec_fn=default_signals)
    first = p.stdout.readline()
    p.stdout.close()  # as head does after its lines
    try:
        got = p.wait(timeout=HANG)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise AssertionError("minivm did not end after its stdout was closed")
    with open(err) as f:
        text = f.read()
    no_sanitizer_report(text, "closed stdout")
    check(first == b"line 0\n", f"first line {first!r}")
    check(got == 1, f"closed stdout: {describe(got)}, want exit 1\n{text[-2000:]}")
    check("minivm: error: cannot write to stdout: Broken pipe\n" in text, text[-2000:])
    check(f"heapprof: wrote {out}" in text, f"no VM death or profile:\n{text[-2000:]}")
    check_profile(out, "closed stdout")


# ---- a signal's end is bounded ----------------------------------------------

def small_pipe():
    """A pipe of one page, so that a slow (sanitizer) build fills it soon."""
    rfd, wfd = os.pipe()
    fcntl.fcntl(wfd, fcntl.F_SETPIPE_SZ, 4096)
    return rfd, wfd


def pipe_full(fd):
    """No room in the pipe for another line (the writer, which writes for
    ever, is blocked or about to be): a write of up to PIPE_BUF bytes is
    atomic, so it waits for room for all of it, and a pipe can stay a few
    bytes short of its size."""
    avail = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, avail)
    return int.from_bytes(avail, sys.byteorder) >= fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) - 512


def sigterm_when_full(p, rfd, what):
    """Waits until p has filled the pipe read by rfd (its `what`), sends it
    SIGTERM, and returns its exit code."""
    deadline = time.time() + HANG
    while not pipe_full(rfd) and p.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    check(p.poll() is None and pipe_full(rfd), "the pipe never filled")
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=HANG)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise AssertionError(f"SIGTERM with {what} blocked: minivm never ended")


@test
def sigterm_with_stdout_blocked():
    """stdout on a pipe nobody reads, full, a print blocked in it: SIGTERM
    still ends the VM with 143, agents still get VM death (the profile is
    written), and the output given up is one line on stderr."""
    out = fresh("blocked.pb.gz")
    err = fresh("blocked.err")
    rfd, wfd = small_pipe()
    try:
        with open(err, "w") as e:
            p = subprocess.Popen([C.minivm, "--seed=1", f"--heap-profile={out}", PRINTS_FOREVER],
                                 stdin=subprocess.DEVNULL, stdout=wfd, stderr=e, cwd=C.work,
                                 preexec_fn=default_signals)
        os.close(wfd)
        got = sigterm_when_full(p, rfd, "stdout")
    finally:
        os.close(rfd)
    with open(err) as f:
        text = f.read()
    no_sanitizer_report(text, "stdout blocked")
    check(got == 143, f"SIGTERM, stdout blocked: {describe(got)}, want 143\n{text[-2000:]}")
    check("minivm: error: cannot write to stdout: still blocked 2 s after the signal\n" in text,
          text[-2000:])
    check(f"heapprof: wrote {out}" in text, f"no VM death or profile:\n{text[-2000:]}")
    check_profile(out, "stdout blocked")


@test
def sigterm_with_stderr_blocked():
    """stderr on a pipe nobody reads, full (--verbose:gc fills it; the
    collecting thread blocks in its `[gc]` line): nothing in the end can
    write stderr, and the bound ends the process anyway, 143."""
    out = fresh("stderr_blocked.out")
    rfd, wfd = small_pipe()
    try:
        with open(out, "w") as o:
            p = subprocess.Popen([C.minivm, *SIGNAL_OPTS, FOREVER], stdin=subprocess.DEVNULL,
                                 stdout=o, stderr=wfd, cwd=C.work, preexec_fn=default_signals)
        os.close(wfd)
        got = sigterm_when_full(p, rfd, "stderr")
    finally:
        os.close(rfd)
    check(got == 143, f"SIGTERM, stderr blocked: {describe(got)}, want 143")


@test
def sigterm_then_second_while_death_blocked():
    """An agent blocked in VM death (deathwait without its gate): the first
    SIGTERM does not cut it short, a second one ends the process at once,
    143, whatever it is doing."""
    dw = need_test_agent("deathwait")
    gate = fresh("never_gate")
    r = Signalled([*SIGNAL_OPTS, f"{dw}=wait={gate}", FOREVER], "death_blocked",
                     preexec=default_signals)
    r.wait_for(GC_LINE, count=2)
    r.send(signal.SIGTERM)
    r.wait_for(r"deathwait: VMDeath\n")
    r.send(signal.SIGTERM)
    got = r.finish(timeout=HANG)
    check(got == 143, f"second SIGTERM: {describe(got)}, want 143")
    check("deathwait: done" not in r.stderr(), r.stderr()[-2000:])


# ---- outputs that cannot be written ------------------------------------------

@test
def perf_map_write_error():
    """--perf-map=/dev/full: the file opens, every write fails; the program
    runs to its end, and the loss is one line on stderr and exit 1."""
    r = run([C.minivm, "--jit=eager", "--perf-map=/dev/full", HELLO], timeout=HANG)
    no_sanitizer_report(r.stderr, "--perf-map=/dev/full")
    lines = r.stderr.splitlines()
    check(r.returncode == 1 and lines == [
        "minivm: error: --perf-map: cannot write '/dev/full': No space left on device"],
        f"--perf-map=/dev/full: exit {r.returncode}, stderr:\n{r.stderr}")
    check(r.stdout != "", "the program did not run")


@test
def fifo_output_without_reader():
    """heapprof file= a FIFO that no process reads: the final write fails at
    once, one line and exit 1, instead of holding the VM's end for ever."""
    fifo = fresh("out.fifo")
    os.mkfifo(fifo)
    r = run([C.minivm, heapprof(f"file={fifo},top=0"), HELLO], timeout=HANG)
    no_sanitizer_report(r.stderr, "FIFO without reader")
    check(r.returncode == 1, f"FIFO without reader: exit {r.returncode}\n{r.stderr}")
    check(f"heapprof: cannot write {fifo}: no process has the FIFO open for reading\n"
          in r.stderr, r.stderr)


# ---- heapprof's endpoint: Content-Length -------------------------------------

@test
def http_content_length_judged_from_head():
    """400 for Content-Length headers that disagree or are not a number,
    413 for one over the body limit: answered from the headers alone (the
    body is never sent here), in heapprof's words, not after a deadline."""
    r = Running([C.minivm, heapprof("http=0,file=,top=0"), FOREVER])
    try:
        port = r.wait_port()
        cases = [("Content-Length: 5\r\nContent-Length: 6\r\n", b"12345", 400,
                  b"heapprof: bad Content-Length\n"),
                 ("Content-Length: -5\r\n", b"", 400, b"heapprof: bad Content-Length\n"),
                 ("Content-Length: 5x\r\n", b"", 400, b"heapprof: bad Content-Length\n"),
                 ("Content-Length: 99999999999999999999\r\n", b"", 400,
                  b"heapprof: bad Content-Length\n"),
                 ("Content-Length: 2000000\r\n", b"", 413,
                  b"heapprof: Content-Length over 1048576 bytes\n")]
        for headers, body, want, text in cases:
            req = (f"POST /debug/pprof/symbol HTTP/1.1\r\nHost: x\r\n{headers}\r\n").encode() + body
            with socket.create_connection(("127.0.0.1", port), timeout=HANG) as s:
                s.sendall(req)
                st, _, got = read_reply(s)
            check(st == want and got == text,
                  f"{headers!r}: {st} {got[:200]!r}, want {want} {text!r}")
        # Equal duplicates are one length, as in Go.
        req = (b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
               b"content-length:  4\r\n\r\n0x10")
        with socket.create_connection(("127.0.0.1", port), timeout=HANG) as s:
            s.sendall(req)
            st, _, got = read_reply(s)
        check(st == 200, f"equal Content-Length twice: {st} {got[:200]!r}")
    finally:
        r.p.send_signal(signal.SIGTERM)
        code, err = r.finish(timeout=HANG)
        no_sanitizer_report(err, "HTTP")


def main():
    ap = argparse.ArgumentParser()
    add_path_options(ap, "minivm", "heapprof")
    ap.add_argument("--attach", help="minivm-attach, for the attach tests")
    ap.add_argument("--test-agents", help="the build's tests/agents folder (deathwait)")
    ap.add_argument("--work")
    ap.add_argument("-k", action="append")
    a = ap.parse_args()
    take_paths(C, a, "minivm", "heapprof", "attach", "test_agents")
    C.work = work_dir(a.work, "signal_tests_")
    C.go = find_go()
    use_tsan_suppressions()
    default_signals()
    print(f"signal tests: work dir {C.work}; go: {C.go or 'not installed'}")
    return run_tests(TESTS, a.k)


if __name__ == "__main__":
    sys.exit(main())
