#!/usr/bin/env python3
"""Tests of attaching to a running VM (docs/attach.md, docs/tools.md
"Attaching to a running program"): real minivm processes, the real
minivm-attach, real signals and real sockets; profiles read by our decoder
and by `go tool pprof`.

  run_attach_tests.py --minivm build/bin/minivm --attach build/bin/minivm-attach \
      --heapprof build/bin/libheapprof.so --leakcheck build/bin/libleakcheck.so \
      --lifetimes build/bin/liblifetimes.so [--work DIR] [-k SUBSTRING]

Nothing here waits a fixed time: a test waits for a state it can see (a
thread dump showing the program where the test needs it), and time limits
only catch hangs. The statistical check uses fixed seeds (printed) and
5.7-sigma bounds, as the sampler suite's (docs/sampling.md).

The last line of output is `N passed, M failed`.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (  # noqa: E402 (the shared runner, profile decoder and helpers)
    C, Skip, add_path_options, check, find_go, fresh, no_sanitizer_report, run_tests, take_paths,
    test_registry, use_tsan_suppressions, work_dir)
from profiles import Z, by_leaf, check_site_estimates, pprof, read_profile  # noqa: E402
from tool_helpers import comments_of  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = os.path.join(HERE, "attach_phases.mv")
FOREVER = os.path.join(HERE, "forever.mv")
DEEP = os.path.join(HERE, "attach_deep.mv")
TESTS, test = test_registry()


def attach(pid, *args, timeout=60):
    return subprocess.run([C.attach, str(pid), *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, cwd=C.work)


def ok(pid, *args):
    r = attach(pid, *args)
    check(r.returncode == 0 and r.stderr == "",
          f"minivm-attach {pid} {' '.join(args)}: exit {r.returncode}\n{r.stderr}{r.stdout}")
    return r.stdout


def one_line_error(r, code, pattern, what):
    lines = r.stderr.splitlines()
    check(r.returncode == code and len(lines) == 1 and r.stdout == "" and
          lines[0].startswith("minivm-attach: error: ") and re.search(pattern, lines[0]),
          f"{what}: want exit {code} and one line matching /{pattern}/, got exit "
          f"{r.returncode}:\n{r.stderr}{r.stdout}")


def default_signals():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(s, signal.SIG_DFL)


class Vm:
    """A minivm process; stdout on a pipe the test reads only when told (so
    attach_phases.mv blocks in print), stderr in a file."""

    def __init__(self, args, name, env=None, opts=(), prefix=()):
        self.err = fresh(f"{name}.err")
        with open(self.err, "w") as e:
            self.p = subprocess.Popen([*prefix, C.minivm, *opts, *args], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=e, cwd=C.work,
                                      preexec_fn=default_signals, env=env, text=True)
        self.pid = self.p.pid
        self.cmd = " ".join([C.minivm, *opts, *args])
        self.out = []
        self.reader = None

    def stderr(self):
        with open(self.err) as f:
            return f.read()

    def read_stdout(self):
        """Starts draining stdout (the program blocked in print goes on)."""
        def drain():
            for line in self.p.stdout:
                self.out.append(line)
        self.reader = threading.Thread(target=drain, daemon=True)
        self.reader.start()

    def wait_threads(self, want, timeout=120):
        """Polls `threads` until its output is `want` (the program got
        where the test needs it); returns it."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            check(self.p.poll() is None, f"{self.cmd} ended early ({self.p.returncode}):\n"
                                         f"{self.stderr()[-2000:]}")
            r = attach(self.pid, "threads")
            last = r
            if r.returncode == 0 and r.stdout == want:
                return r.stdout
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"threads never became:\n{want}\nlast: exit {last.returncode}\n"
                             f"{last.stdout}{last.stderr}")

    def wait_running(self, timeout=60):
        """Waits until the VM answers (its program has started). Drains
        stdout first, if not yet (as finish does): a program blocked on a
        full pipe would never get going."""
        if self.reader is None:
            self.read_stdout()
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = attach(self.pid, "heap")
            if r.returncode == 0:
                return
            check(self.p.poll() is None, f"{self.cmd} ended early:\n{self.stderr()[-2000:]}")
            time.sleep(0.05)
        raise AssertionError(f"{self.cmd}: never answered: {r.stderr}")

    def finish(self, timeout=300):
        if self.reader is None:
            self.read_stdout()
        try:
            code = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.cmd}: did not end within {timeout} s")
        self.reader.join(timeout=60)
        no_sanitizer_report(self.stderr(), self.cmd)
        return code

    def terminate(self):
        """Ends the VM as a user ends a server, with SIGTERM: the agents
        write their final output and the VM exits 143 (128 + SIGTERM)."""
        self.p.send_signal(signal.SIGTERM)
        check(self.finish() == 143, f"{self.cmd}: exit code {self.p.returncode} after SIGTERM, "
                                    "want 143")

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def line_of(text):
    """The line of attach_phases.mv that holds `text` (once)."""
    with open(PHASES) as f:
        hits = [i for i, l in enumerate(f, 1) if text in l]
    assert len(hits) == 1, f"{text!r} in {PHASES}: lines {hits}"
    return hits[0]


def phases_stack():
    """The stacks attach_phases.mv's threads have while main waits."""
    printing = line_of('print("line", i)')
    waiting = line_of("  wait_here(lines);")
    spinning = line_of("while (stop == 0)")
    calling = line_of("return spin_inner();")
    return (f'"main" #0\n  at wait_here ({PHASES}:{printing})\n  at main ({PHASES}:{waiting})\n\n'
            f'"thread-1" #1\n  at spin_inner ({PHASES}:{spinning})\n'
            f'  at spin ({PHASES}:{calling})\n')


def socket_path(pid):
    return f"/tmp/minivm-attach-{os.geteuid()}/{pid}.sock"


# ---- the user's path --------------------------------------------------------

@test
def attach_threads_shows_known_stacks():
    """`threads` on a program blocked in print (main) and spinning (thread-1):
    exact frames, innermost first; the VM goes on and ends normally."""
    v = Vm([PHASES, "20000", "0"], "threads")
    try:
        v.wait_threads(phases_stack())
        d = f"/tmp/minivm-attach-{os.geteuid()}"
        st = os.lstat(d)
        check(stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700,
              f"{d}: mode {oct(st.st_mode)}")
        st = os.lstat(socket_path(v.pid))
        check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
              f"socket mode {oct(st.st_mode)}")
        v.read_stdout()
        code = v.finish()
        check(code == 0, f"exit {code}: {v.stderr()}")
        check(v.out[-1] == "done 1000\n" and len(v.out) == 20001, f"stdout ends {v.out[-2:]}")
        check(not os.path.exists(socket_path(v.pid)), "the socket file outlived the VM")
    finally:
        v.kill()


@test
def attach_threads_deep_stacks():
    """`threads` shows a recursion 300 calls deep frame by frame, cuts one
    5,000 calls deep to its innermost 1,024 and outermost 64 frames with
    one `... N frames omitted` line, and lists an agent thread after them
    (docs/attach.md)."""
    with open(DEEP) as f:
        lines = f.read().split("\n")
    at = {text: lines.index(next(l for l in lines if text in l)) + 1
          for text in ("while (stop == 0)", "return bottom();", "return down(n - 1) + 1;",
                       "join(t1);")}

    def frame(text, fn):
        return f"  at {fn} ({DEEP}:{at[text]})\n"

    def thread(index, depth, cut):
        inner = ([frame("while (stop == 0)", "bottom"), frame("return bottom();", "down")] +
                 [frame("return down(n - 1) + 1;", "down")] * depth)
        if cut:
            inner = inner[:1024] + [f"  ... {len(inner) - 1088} frames omitted\n"] + inner[-64:]
        return f'"thread-{index}" #{index}\n' + "".join(inner)

    want = (f'"main" #0\n{frame("join(t1);", "main")}\n' + thread(1, 300, False) + "\n" +
            thread(2, 5000, True))
    opts = ["--stack-depth=10000"]
    # An agent thread (RunAgentThread) is listed after the language threads.
    sampler = os.path.join(C.test_agents or "", "libheapsampler.so")
    if C.test_agents and os.path.exists(sampler):
        opts.append(f"-agentpath:{sampler}")
        want += '\n"heapsampler-sweeper" agent thread\n'
    v = Vm([DEEP, "300", "5000"], "deep", opts=opts)
    try:
        v.wait_threads(want)
        v.terminate()
    finally:
        v.kill()


@test
def attach_heap_gc_agents():
    """heap (per space, collections, sampling), gc (one more full
    collection), agents, before and after loading heapprof."""
    v = Vm([FOREVER, "2"], "heap", opts=["--young=4m"])
    try:
        v.wait_running()
        heap = ok(v.pid, "heap")
        for pat in (r"^heap: \d+ bytes reserved$", r"^  eden: \d+ of \d+ bytes used$",
                    r"^  survivor: \d+ of \d+ bytes used$", r"^  old: \d+ of \d+ bytes used$",
                    r"^collections: \d+ minor, \d+ full", r"^sampling: off \(no agent loaded\); interval 524288 bytes, the default$"):
            check(re.search(pat, heap, re.M), f"heap: no /{pat}/ in\n{heap}")
        full = int(re.search(r"(\d+) full", heap).group(1))
        out = ok(v.pid, "gc")
        check(re.match(r"full collection done: \d+ -> \d+ bytes used\n$", out), out)
        full2 = int(re.search(r"(\d+) full", ok(v.pid, "heap")).group(1))
        check(full2 >= full + 1, f"full collections {full} -> {full2} after gc")
        check(ok(v.pid, "agents") == "no agents loaded\n", "agents before any load")
        prof = fresh("heap_agents.pb.gz")
        out = ok(v.pid, "load", f"{C.heapprof}=file={prof},interval=64k,top=0")
        check(out.endswith(f"agent '{C.heapprof}': Agent_OnAttach returned 0\n"), out)
        agents = ok(v.pid, "agents")
        check(agents == f"{C.heapprof} (attached) options 'file={prof},interval=64k,top=0' "
                        f"environments 0\n", agents)
        heap = ok(v.pid, "heap")
        check(f"sampling: interval 65536 bytes (the finest asked for); sampled by:\n"
              f"  environment 0 ({C.heapprof}): every thread, interval 65536 bytes\n" in heap, heap)
        v.terminate()
        check(os.path.getsize(prof) > 0, "no final profile at VM death")
    finally:
        v.kill()


@test
def attach_heapprof_unbiased_after_attach():
    """heapprof attached while attach_phases.mv waits: the profile has the
    known allocations after the attach within 5.7 sigma, none of the
    objects allocated before it, and says so in its comments."""
    interval = 65536
    sizes = {"small": (400000, 32), "medium": (40000, 1024), "large": (200, 200024)}
    checks = 0
    seeds = (21, 22) if C.full_sweep else (21,)
    for seed in seeds:
        v = Vm([PHASES], f"unbiased_{seed}", opts=[f"--seed={seed}"])
        try:
            v.wait_threads(phases_stack())
            out = fresh(f"attached_{seed}.pb.gz")
            ok(v.pid, "load", f"heapprof=interval={interval},file={out},top=0")
            v.read_stdout()
            check(v.finish() == 0, v.stderr())
        finally:
            v.kill()
        prof = read_profile(out)
        got_b = by_leaf(prof, 1, key=lambda fr: fr[0])
        check("before" not in got_b, f"--seed={seed}: objects from before the attach: {got_b}")
        check(set(got_b) <= {"small", "medium", "large", "wait_here", "main"},
              f"--seed={seed}: unexpected sites {sorted(got_b)}")
        checks += check_site_estimates(prof, sizes, interval, seed)
        comments = comments_of(out)
        check(any("objects allocated before the attach are not in this profile" in c
                  for c in comments), f"comments: {comments}")
        if C.go:
            raw = pprof(["-raw", out])
            check("objects allocated before the attach" in raw, raw[:400])
    print(f"    {checks} checks, --seed={' and '.join(map(str, seeds))}, |z| <= {Z}")


def dump_until_sampled(pid, path, site="allocate_forever", tries=600, name=None):
    """Dumps the heapprof's profile (the one named `name`, or the only one)
    to path until `site` is in it:
    an instance just started has sampled nothing until the program has
    allocated an interval's worth, and how soon that is is up to the
    scheduler. A condition waited for, never a duration: only the overall
    limit (tries x 0.1 s) ends the wait, and then the test fails."""
    for _ in range(tries):
        ok(pid, "load", f"heapprof=dump,file={path}" + (f",name={name}" if name else ""))
        if site in by_leaf(read_profile(path), 1, key=lambda fr: fr[0]):
            return True
        time.sleep(0.1)
    return False


@test
def attach_heapprof_dump_set_stop_start():
    """async-profiler style control by repeated attach: dump now, change the
    interval, stop (final profile; events, tags and threads released),
    start again; the VM runs on and ends normally."""
    v = Vm([FOREVER, "2"], "control", opts=["--young=4m", "--seed=3"])
    try:
        v.wait_running()
        final1 = fresh("control_final1.pb.gz")
        ok(v.pid, "load", f"heapprof=start,file={final1},top=0")
        r = attach(v.pid, "load", "heapprof=start")
        one_line_error(r, 1, r"Agent_OnAttach returned 1: heapprof: already running \(heapprof\): use dump",
                       "start twice")
        dump1 = fresh("control_dump1.pb.gz")
        out = ok(v.pid, "load", f"heapprof=dump,file={dump1}")
        check(f"heapprof: wrote {dump1}" in out, out)
        check(dump_until_sampled(v.pid, dump1), "no dump has the site")
        out = ok(v.pid, "load", "heapprof=set,interval=4k")
        check("heapprof: sampling interval now 4096 bytes" in out, out)
        check("sampling: interval 4096 bytes (the finest asked for); sampled by:" in ok(v.pid, "heap"),
              "interval set")
        threads_before = len(os.listdir(f"/proc/{v.pid}/task"))
        out = ok(v.pid, "load", "heapprof=stop")
        check(f"heapprof: wrote {final1}" in out and "released" in out, out)
        check(os.path.getsize(final1) > 0, "no final profile at stop")
        check("no environment samples" in ok(v.pid, "heap"), "still sampling after stop")
        agents = ok(v.pid, "agents")
        check(re.search(r"options 'start,file=[^']*' environments 0 \(disposed\)$", agents, re.M),
              f"agents after stop:\n{agents}")
        threads_after = len(os.listdir(f"/proc/{v.pid}/task"))
        check(threads_after == threads_before - 1,
              f"the worker thread was not released: {threads_before} -> {threads_after} tasks")
        r = attach(v.pid, "load", "heapprof=dump")
        one_line_error(r, 1, r"heapprof: 'dump': no heapprof is running \(start one first\)",
                       "dump after stop")
        final2 = fresh("control_final2.pb.gz")
        ok(v.pid, "load", f"heapprof=file={final2},top=0")
        # Something sampled by the second instance before the VM ends.
        check(dump_until_sampled(v.pid, fresh("control_dump2.pb.gz")),
              "the second start sampled nothing")
        v.terminate()
        check(os.path.getsize(final2) > 0, "no final profile of the second start")
        if C.go:
            for f in (dump1, final1, final2):
                top = pprof(["-top", "-sample_index=alloc_space", f])
                check("allocate_forever" in top, f"go tool pprof -top {f}:\n{top}")
    finally:
        v.kill()


@test
def attach_controls_command_line_and_named_heapprofs():
    """Every heapprof instance is controllable, however it started: one from
    -agentlib (named "heapprof" by default) and one named on the command
    line are dumped, re-configured and stopped separately by attach, and an
    action without name= is refused while both run."""
    first, second = fresh("named_first.pb.gz"), fresh("named_second.pb.gz")
    v = Vm([f"-agentpath:{C.heapprof}=file={first},top=0",
            f"-agentpath:{C.heapprof}=name=second,file={second},top=0", FOREVER, "2"],
           "named", opts=["--young=4m", "--seed=5"])
    try:
        v.wait_running()
        r = attach(v.pid, "load", "heapprof=dump")
        one_line_error(r, 1, r"heapprof: 'dump': several heapprofs are running \(heapprof, second\): "
                       r"say which with name=", "dump without a name")
        r = attach(v.pid, "load", "heapprof=dump,name=third")
        one_line_error(r, 1, r"heapprof: 'dump': no heapprof named 'third' is running "
                       r"\(running: heapprof, second\)", "an unknown name")
        r = attach(v.pid, "load", f"heapprof=name=second,file={fresh('named_dup.pb.gz')}")
        one_line_error(r, 1, r"heapprof: bad option 'name=second': a heapprof of that name is running",
                       "a name in use")
        dump = fresh("named_dump.pb.gz")
        out = ok(v.pid, "load", f"heapprof=dump,name=second,file={dump}")
        check(f"heapprof: wrote {dump} (est. " in out and "since the program started" in out, out)
        check(dump_until_sampled(v.pid, dump, name="second"), "no dump of 'second' has the site")
        out = ok(v.pid, "load", "heapprof=set,name=second,interval=64k")
        check("heapprof: sampling interval now 65536 bytes" in out, out)
        heap = ok(v.pid, "heap")
        check(re.search(r"environment 0 \(.*\): every thread, interval 524288 bytes\n"
                        r"  environment 1 \(.*\): every thread, interval 65536 bytes\n", heap), heap)
        out = ok(v.pid, "load", "heapprof=stop,name=heapprof")
        check(f"heapprof: wrote {first}" in out and "'heapprof' stopped" in out, out)
        check(os.path.getsize(first) > 0, "no final profile of the stopped instance")
        # One left: actions without a name reach it.
        dump2 = fresh("named_dump2.pb.gz")
        check(f"heapprof: wrote {dump2}" in ok(v.pid, "load", f"heapprof=dump,file={dump2}"), "dump")
        agents = ok(v.pid, "agents")
        check(re.search(r"environments 0 \(disposed\)\n.*name=second.* environments 1\n", agents),
              f"agents:\n{agents}")
        v.terminate()
        check(os.path.getsize(second) > 0, "no final profile of 'second'")
    finally:
        v.kill()


@test
def attach_leakcheck_and_lifetimes():
    """The other tool agents load into a running VM and report at its end."""
    v = Vm([FOREVER], "others", opts=["--young=2m"])
    try:
        v.wait_running()
        trace = fresh("attached_lifetimes.jsonl")
        ok(v.pid, "load", "leakcheck")
        # interval=0 samples every allocation, so the trace's 64 KiB buffer
        # reaches the file after a few hundred of them: the test waits for
        # that instead of hoping a sample fell between load and SIGTERM
        # (under TSan, at the default 256 KiB, one often did not).
        ok(v.pid, "load", f"lifetimes=trace={trace},interval=0")
        agents = ok(v.pid, "agents")
        check(agents.count("(attached)") == 2, agents)
        deadline = time.time() + 120
        while time.time() < deadline:
            if os.path.exists(trace):
                with open(trace) as f:
                    if '"ev":"alloc"' in f.read():
                        break
            time.sleep(0.05)
        v.terminate()
        err = v.stderr()
        check("leakcheck: at exit" in err and "lifetimes:" in err, err[-2000:])
        with open(trace) as f:
            check('"ev":"alloc"' in f.read(), "no alloc events in the lifetimes trace")
    finally:
        v.kill()


@test
def attach_during_gc_stress():
    """Attach, dump, threads, gc and stop while three threads allocate with a
    collection at every slow path (--gc-stress=1)."""
    v = Vm([FOREVER, "3"], "stress", opts=["--young=1m", "--gc-stress=1"])
    try:
        v.wait_running()
        final = fresh("stress_final.pb.gz")
        ok(v.pid, "load", f"heapprof=interval=4k,file={final},top=0")
        for i in range(3):
            ok(v.pid, "load", f"heapprof=dump,file={fresh(f'stress_{i}.pb.gz')}")
            t = ok(v.pid, "threads")
            check(t.count("  at allocate_forever (") == 3, t)
            ok(v.pid, "gc")
        ok(v.pid, "load", "heapprof=stop")
        check(v.p.poll() is None, "the VM ended")
        v.terminate()
        check(os.path.getsize(final) > 0, "final profile")
    finally:
        v.kill()


# ---- mistakes and hostile peers --------------------------------------------

@test
def attach_bad_usage_exits_2():
    for args, pat in (((), "expected a PID"), (("x", "threads"), "not a process id"),
                      (("0", "threads"), "not a process id"), (("1",), "expected a PID"),
                      (("1", "jstack"), "unknown command 'jstack'"),
                      (("1", "load"), "'load' needs an argument"),
                      (("1", "threads", "x"), "'threads' takes no argument"),
                      (("1", "load", "a", "b"), "too many arguments")):
        r = subprocess.run([C.attach, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=30)
        one_line_error(r, 2, pat, f"minivm-attach {' '.join(args)}")
    r = subprocess.run([C.attach, "--help"], stdout=subprocess.PIPE, text=True, timeout=30)
    check(r.returncode == 0 and r.stdout.startswith("usage: minivm-attach PID COMMAND"), r.stdout)


@test
def attach_dead_pid_and_non_minivm():
    """A PID with no process; a process that is not minivm (it must survive:
    no SIGQUIT is sent to it); one that carries minivm's mark but never
    answers (10 s limit)."""
    p = subprocess.Popen(["true"])
    p.wait()
    one_line_error(attach(p.pid, "threads"), 1, rf"no process {p.pid}$", "dead PID")
    s = subprocess.Popen(["sleep", "600"], preexec_fn=default_signals)
    try:
        one_line_error(attach(s.pid, "threads"), 1, "is not a minivm VM", "sleep")
        check(s.poll() is None, "the non-minivm process was killed")
    finally:
        s.kill()
        s.wait()
    # A process that carries minivm's mark (a thread named minivm-signals,
    # SIGQUIT blocked) but has no listener.
    code = ("import ctypes,signal,sys,time\n"
            "ctypes.CDLL(None).prctl(15, b'minivm-signals', 0, 0, 0)\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK,[signal.SIGQUIT])\n"
            "print('ready',flush=True)\ntime.sleep(600)\n")
    q = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        check(q.stdout.readline() == "ready\n", "python child")
        start = time.time()
        r = attach(q.pid, "heap")
        one_line_error(r, 1, r"did not answer within 10 s", "silent pseudo-VM")
        check(time.time() - start < 30, "no time limit")
        check(not os.path.exists(f"/tmp/minivm-attach-{os.geteuid()}/{q.pid}.trigger"),
              "trigger file left behind")
    finally:
        q.kill()
        q.wait()


@test
def attach_refused_for_other_users():
    """SO_PEERCRED: a peer that is not the VM's user (simulated with the
    VM's test seam, which makes it accept only another uid) is refused with
    one line, exit 1, and nothing runs."""
    env = dict(os.environ, MINIVM_ATTACH_TEST_ONLY_UID=str(os.geteuid() + 4242))
    v = Vm([FOREVER], "creds", env=env)
    try:
        v.read_stdout()
        deadline = time.time() + 60
        while True:
            r = attach(v.pid, "load", "heapprof")
            if "permission denied" in r.stderr or time.time() > deadline:
                break
            time.sleep(0.05)
        one_line_error(r, 1, rf"permission denied: user {os.geteuid()} may not attach", "creds")
        check(v.p.poll() is None, "VM died")
        v.terminate()
        check("heapprof" not in v.stderr(), "the agent ran for a refused peer")
    finally:
        v.kill()


def raw_request(pid, data, shut=True, timeout=30):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(socket_path(pid))
    if data:
        s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    reply = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    s.close()
    return reply


def parse_reply(reply, what=""):
    check(len(reply) >= 12 and reply[:4] == b"MVA1", f"reply {reply[:40]!r} ({what})")
    status, n = struct.unpack("<II", reply[4:12])
    check(len(reply) == 12 + n, f"reply length {len(reply)} vs {n}")
    return status, reply[12:].decode()


@test
def attach_garbage_and_silent_clients():
    """Malformed requests get an error reply; a silent client is cut off
    after 2 s without holding the others up for longer; the VM is unharmed."""
    v = Vm([FOREVER, "2"], "garbage", opts=["--young=4m"])
    try:
        v.wait_running()
        req = lambda payload: b"MVA1" + struct.pack("<I", len(payload)) + payload  # noqa: E731
        for data, pat in ((b"GET / HTTP/1.0\r\n\r\n", "not the minivm attach protocol"),
                          (b"MVA1" + struct.pack("<I", 1 << 30), "at most 16384"),
                          (req(b"jstack"), "unknown command 'jstack'"),
                          (req(b"\xff\x00\x01"), "unknown command"),
                          (req(b"threads\x00x"), "'threads' takes no argument"),
                          (req(b"load\x00a\x00b"), "more than one argument"),
                          (req(b"load"), "'load' needs an argument"),
                          (b"MVA1\x05\x00", "incomplete header"),
                          (req(b"heap")[:-2], "incomplete body"),
                          (b"", "incomplete header")):
            status, text = parse_reply(raw_request(v.pid, data), repr(data[:30]))
            check(status == 1 and re.search(pat, text), f"{data[:30]!r}: {status} {text!r}")
        # A silent client (connects, sends nothing, keeps the socket open).
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.connect(socket_path(v.pid))
        start = time.time()
        heap = ok(v.pid, "heap")  # waits behind the silent one for at most ~2 s
        check("eden" in heap and time.time() - start < 8, f"{time.time() - start:.1f} s")
        silent.settimeout(10)
        status, text = parse_reply(silent.recv(65536), "silent")
        check(status == 1 and "timed out" in text, text)
        silent.close()
        check(v.p.poll() is None, "VM died")
        check("at allocate_forever" in ok(v.pid, "threads"), "threads after garbage")
        v.terminate()
    finally:
        v.kill()


@test
def attach_load_failures():
    """A library that does not exist, one without Agent_OnAttach, an agent
    whose Agent_OnAttach fails (its error in the reply): one line, exit 1;
    the VM runs on."""
    v = Vm([FOREVER], "loadfail")
    try:
        v.wait_running()
        one_line_error(attach(v.pid, "load", "/nonexistent/libx.so"), 1,
                       r"cannot load agent '/nonexistent/libx.so'", "missing path")
        one_line_error(attach(v.pid, "load", "nosuchagent"), 1,
                       r"cannot load agent 'nosuchagent': no libnosuchagent.so in", "missing name")
        if C.test_agents and os.path.exists(os.path.join(C.test_agents, "libordering.so")):
            lib = os.path.join(C.test_agents, "libordering.so")
            one_line_error(attach(v.pid, "load", lib), 1, r"does not export Agent_OnAttach",
                           "no Agent_OnAttach")
        one_line_error(attach(v.pid, "load", "heapprof=interval=lots"), 1,
                       r"Agent_OnAttach returned 1: heapprof: bad option 'interval=lots'",
                       "bad option")
        check(ok(v.pid, "agents") == "no agents loaded\n", "a failed agent is listed")
        v.terminate()
    finally:
        v.kill()


@test
def attach_sigquit_without_trigger_ends_in_order():
    """Ctrl-\\ (SIGQUIT with no attach request) still quits: exit 131, in
    order, with the program's output flushed, as SIGINT does."""
    v = Vm([FOREVER], "sigquit", opts=["--young=1m", "--verbose:gc"])
    try:
        deadline = time.time() + 60
        while "[gc]" not in v.stderr() and time.time() < deadline:
            time.sleep(0.02)
        v.p.send_signal(signal.SIGQUIT)
        code = v.finish()
        check(code == 131, f"exit {code}")
        check("".join(v.out).startswith("line 0\n") and len(v.out) == 1000,
              f"stdout not flushed: {len(v.out)} lines")
    finally:
        v.kill()


# ---- heapprofd's hand-off: minivm-collector --attach -----------------------

@test
def attach_collector_hand_off():
    """minivm-collector --attach=A,B,C,A: each running VM's remote agent
    connects back (a ring each); B is killed (its final profile says it
    died), A attached twice is refused once, the others get final profiles
    when the collector stops, and the VMs run on without it."""
    if not C.collector or not C.remote:
        raise Skip("no --collector/--remote given")
    vms = [Vm([FOREVER], f"coll_{i}", opts=["--young=4m"]) for i in range(3)]
    coll = None
    try:
        for v in vms:
            v.wait_running()
        a, b, c = (v.pid for v in vms)
        out = os.path.join(C.work, "collector_out")
        shutil.rmtree(out, ignore_errors=True)
        err = fresh("collector.err")
        with open(err, "w") as e:
            coll = subprocess.Popen([C.collector, "--socket=coll.sock", f"--out={out}",
                                     f"--attach={a},{b},{c},{a}", "--attach-options=interval=64k"],
                                    stdout=subprocess.DEVNULL, stderr=e, cwd=C.work,
                                    preexec_fn=default_signals)

        def log():
            with open(err) as f:
                return f.read()

        def wait_log(pattern, count=1):
            deadline = time.time() + 120
            while len(re.findall(pattern, log())) < count:
                check(time.time() < deadline and coll.poll() is None,
                      f"collector log never had {count} x /{pattern}/:\n{log()}")
                time.sleep(0.05)

        wait_log(r"attached to pid \d+\n", 3)
        wait_log(rf"cannot attach to pid {a}: .*remote: loaded twice")
        for pid in (a, b, c):
            check(re.search(rf"connection \d+ from pid {pid} \(buffer \d+ bytes, interval 65536\)",
                            log()), f"no connection from {pid}:\n{log()}")
        vms[1].kill()
        wait_log(rf"wrote \S+heap\.{b}\.\d+\.final\.pb\.gz \(final: the VM died")
        coll.send_signal(signal.SIGTERM)
        check(coll.wait(timeout=120) == 0, f"collector exit:\n{log()}")
        for pid in (a, c):
            finals = [f for f in os.listdir(out) if re.match(rf"heap\.{pid}\.\d+\.final\.pb\.gz$", f)]
            check(len(finals) == 1, f"final profiles of {pid}: {os.listdir(out)}")
            prof = read_profile(os.path.join(out, finals[0]))
            check("allocate_forever" in by_leaf(prof, 1, key=lambda fr: fr[0]),
                  f"{finals[0]}: no allocate_forever")
        for v in (vms[0], vms[2]):
            check(v.p.poll() is None, "a VM ended with its collector")
            v.terminate()
    finally:
        if coll is not None and coll.poll() is None:
            coll.kill()
            coll.wait()
        for v in vms:
            v.kill()


# ---- the class histogram (heap histo) --------------------------------------

HISTO = os.path.join(HERE, "attach_histo.mv")


def class_histogram(text, what):
    """`heap histo`'s reply split: the summary's lines, the rows as
    [(rank, class, instances, bytes)] and the Total line's
    (instances, bytes, classes)."""
    head, sep, table = text.partition("class histogram (live objects, exact: every object "
                                      "reachable from the roots; a heap walk of ")
    check(sep and head.endswith("\n"), f"{what}: no class histogram title in\n{text}")
    lines = table.splitlines()
    check(re.match(r"^\d+\.\d ms\):$", lines[0]) and
          lines[1].split() == ["#", "instances", "bytes", "class"],
          f"{what}: histogram title and header\n{table}")
    rows = []
    for line in lines[2:-1]:
        m = re.match(r"^ *(\d+): +([\d,]+) +([\d,]+)  (\S+)$", line)
        check(m, f"{what}: bad row {line!r}")
        rows.append((int(m.group(1)), m.group(4), int(m.group(2).replace(",", "")),
                     int(m.group(3).replace(",", ""))))
    m = re.match(r"^Total +([\d,]+) +([\d,]+)  \((\d+) class(es)?\)$", lines[-1])
    check(m, f"{what}: bad Total line {lines[-1]!r}")
    total = (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")), int(m.group(3)))
    return head, rows, total


@test
def attach_heap_class_histogram():
    """heap histo[=N|all] (jmap -histo:live): the Leaf and Pair objects that
    attach_histo.mv keeps live (in a global, main's locals and another
    thread's) and counts itself, exactly, while both threads make garbage and
    the young generation collects; also after a full collection moved them.
    `heap` alone is unchanged, the summary's lines come first, rows are
    ranked by bytes, N caps the rows and the Total is of every class."""
    v = Vm([HISTO], "histo", opts=["--young=4m"])
    try:
        v.read_stdout()
        deadline = time.time() + 120
        want = {}
        while len(want) < 2:
            check(time.time() < deadline, f"no counts from {HISTO}: {v.out[:3]}")
            check(v.p.poll() is None, f"{v.cmd} ended early:\n{v.stderr()[-2000:]}")
            for line in list(v.out[:2]):
                name, n, size = line.split()
                want[name] = (int(n), int(size))
            time.sleep(0.05)
        check(set(want) == {"Leaf", "Pair"}, f"counts: {want}")
        plain = ok(v.pid, "heap")
        check("class histogram" not in plain and plain.startswith("heap: "), plain)
        shape = lambda t: re.sub(r"\d+", "N", t)  # noqa: E731
        for when in ("while collecting", "after gc"):
            if when == "after gc":
                ok(v.pid, "gc")
            out = ok(v.pid, "heap", "histo=all")
            head, rows, total = class_histogram(out, f"histo=all {when}")
            check(shape(head) == shape(plain), f"summary lines differ from heap's:\n{head}")
            got = {name: (n, size) for _, name, n, size in rows}
            for name, counts in want.items():
                check(got.get(name) == counts, f"{when}: {name} {got.get(name)}, the program "
                                               f"keeps {counts} (instances, bytes)")
            check([r[0] for r in rows] == list(range(1, len(rows) + 1)), f"ranks {rows}")
            check(all(rows[i][3] >= rows[i + 1][3] for i in range(len(rows) - 1)),
                  f"{when}: rows not by bytes, descending: {rows}")
            check(len(set(got)) == len(rows), f"a class twice: {rows}")
            check(total == (sum(r[2] for r in rows), sum(r[3] for r in rows), len(rows)),
                  f"{when}: Total {total} vs rows {rows}")
            # The built-in classes by their names: the global array of
            # leaves, the spawned thread (main's local `t`).
            check(got.get("Thread", (0, 0))[0] == 1 and got.get("Array", (0, 0))[0] >= 1,
                  f"{when}: built-in classes {got}")
        # histo: the 20 largest (here fewer classes than that); histo=1 the
        # largest alone, with the Total still of all of them.
        _, rows, total = class_histogram(ok(v.pid, "heap", "histo"), "histo")
        check(len(rows) == total[2] <= 20 and rows[0][1] == "Leaf", f"histo: {rows} {total}")
        _, rows, total = class_histogram(ok(v.pid, "heap", "histo=1"), "histo=1")
        check(rows == [(1, "Leaf", *want["Leaf"])] and total[2] >= 4, f"histo=1: {rows} {total}")
        # Mistakes: one line, exit 2, before anything reaches the VM; the VM
        # checks a request from another client the same way.
        for arg in ("histo=0", "histo=", "histo=-1", "histo=+3", "histo=x", "histo=1e3",
                    "histogram", "histo=all,live", ""):
            one_line_error(attach(v.pid, "heap", arg), 2, r"'heap' takes 'histo', 'histo=N'",
                           f"heap {arg!r}")
        one_line_error(attach(v.pid, "heap", "histo=" + "9" * 30), 2, r"'heap' takes 'histo'",
                       "heap histo=<overflow>")
        req = lambda payload: b"MVA1" + struct.pack("<I", len(payload)) + payload  # noqa: E731
        for payload in (b"heap\x00histo=0", b"heap\x00", b"heap\x00\xff"):
            status, text = parse_reply(raw_request(v.pid, req(payload)), repr(payload))
            check(status == 1 and text.startswith("'heap' takes 'histo', 'histo=N' (N >= 1) or "
                                                  "'histo=all'") and "\n" not in text,
                  f"{payload!r}: {status} {text!r}")
        check(v.p.poll() is None, "VM died")
        v.p.send_signal(signal.SIGTERM)
        check(v.finish() == 143, "SIGTERM")
    finally:
        v.kill()

# ---- the threat model (docs/attach.md): who may answer, what is signalled --

def test_agent(name):
    lib = os.path.join(C.test_agents or "", f"lib{name}.so")
    if not C.test_agents or not os.path.exists(lib):
        raise Skip(f"no {lib} (--test-agents)")
    return lib


def wait_for(cond, what, timeout=120):
    """Waits for a state the test can see; the limit only catches hangs."""
    deadline = time.time() + timeout
    while not cond():
        check(time.time() < deadline, f"never happened: {what}")
        time.sleep(0.02)


def as_user(user, group=None):
    return ["setpriv", f"--reuid={user}", f"--regid={group or user}", "--clear-groups"]


# A listener another user could put where the VM's should be: it records how
# many bytes each connection sent it, and answers with a forged reply that
# would clear the screen and claim success.
FAKE_LISTENER = r"""
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.listen(4)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(30)
    got = b""
    try:
        while len(got) < 8 or len(got) < 8 + struct.unpack("<I", got[4:8])[0]:
            chunk = c.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    print(f"connection {len(got)} bytes", flush=True)
    text = b"\x1b[2J\x1b[Hforged: all is well\n"
    try:
        c.sendall(b"MVA1" + struct.pack("<II", 0, len(text)) + text)
    except OSError:
        pass
    c.close()
"""


@test
def attach_refuses_a_spoofed_folder_or_listener():
    """Another user makes the VM's attach folder first (or a symlink to one
    of theirs) and listens in it; the VM's own user leaves it 0755; another
    process of the VM's user, or root, listens on the VM's socket path: the
    client refuses each with one line and exit 1, sends the listener
    nothing and does not signal the VM. Then, with the folder cleared, the
    same client attaches. The VM runs as its own uid so that its folder is
    the test's alone."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        raise Skip("needs root and setpriv (the CI runs as root)")
    uid = 40000 + os.getpid() % 20000
    folder = f"/tmp/minivm-attach-{uid}"
    elsewhere = f"{folder}.elsewhere"

    def clear():
        if os.path.islink(folder):
            os.unlink(folder)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(elsewhere, ignore_errors=True)

    def run(cmd):
        subprocess.run(cmd, check=True, timeout=60)

    nobody, vm_user = as_user("nobody", "nogroup"), as_user(uid)
    # The other users run the VM and a Python: files of root's home (a
    # pyenv Python) may be out of their reach.
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    for user in (nobody, vm_user):
        if subprocess.run([*user, "test", "-x", C.minivm, "-a", "-r", FOREVER, "-a", "-x",
                           python], timeout=60).returncode != 0:
            raise Skip(f"{C.minivm}, {FOREVER} or {python} out of reach of {user[1]}")
    clear()
    v = Vm([FOREVER], "spoofed", prefix=vm_user)
    try:
        v.read_stdout()
        # Running its program (forever.mv prints first), with no attach yet:
        # the folder must not exist before the test makes it.
        wait_for(lambda: v.out or v.p.poll() is not None, "the VM started")
        check(v.p.poll() is None, f"{v.cmd} ended:\n{v.stderr()}")
        sock = f"{folder}/{v.pid}.sock"
        cases = (
            ("a folder another user made", nobody, [nobody + ["mkdir", "-m", "0700", folder]],
             rf"refusing {folder}: owned by user 65534, not by user {uid}"),
            ("a symlink another user made", nobody,
             [nobody + ["mkdir", "-m", "0700", elsewhere], nobody + ["ln", "-s", elsewhere, folder]],
             rf"refusing {folder}: not a folder \(a symbolic link\)"),
            ("the VM's user's folder with mode 0755", vm_user,
             [vm_user + ["mkdir", "-m", "0755", folder]], rf"refusing {folder}: mode 0755, not 0700"),
            ("another process of the VM's user", vm_user, [vm_user + ["mkdir", "-m", "0700", folder]],
             rf"refusing the listener on {sock}: it is process \d+, not {v.pid}$"),
            ("a socket root made", [], [vm_user + ["mkdir", "-m", "0700", folder]],
             rf"refusing {sock}: not a socket of user {uid}$"),
        )
        for what, listener_user, setup, pattern in cases:
            clear()
            for cmd in setup:
                run(cmd)
            fake = subprocess.Popen([*listener_user, python, "-c", FAKE_LISTENER, sock],
                                    stdout=subprocess.PIPE, text=True)
            try:
                check(fake.stdout.readline() == "ready\n", f"{what}: the fake listener")
                r = attach(v.pid, "threads")
                one_line_error(r, 1, pattern, what)
            finally:
                fake.kill()
                received = fake.communicate(timeout=60)[0]
            sent = [int(n) for n in re.findall(r"^connection (\d+) bytes$", received, re.M)]
            check(all(n == 0 for n in sent), f"{what}: the fake listener received {sent} bytes")
            check(v.p.poll() is None, f"{what}: the VM ended (signalled?)")
        clear()
        check('"main" #0' in ok(v.pid, "threads"), "attach once the folder is the VM's")
        st = os.lstat(folder)
        check(st.st_uid == uid and stat.S_IMODE(st.st_mode) == 0o700, f"{folder}: {st}")
        v.terminate()
    finally:
        v.kill()
        clear()


@test
def attach_escapes_control_characters():
    """An agent's stderr with an escape sequence, a carriage return and a
    bell, and an agent thread whose name holds newlines, quotes and an
    escape sequence: `load`, `threads` and `agents` print them escaped, so
    the name forges no line of the thread dump and nothing reaches the
    terminal raw."""
    lib = test_agent("attachwait")
    v = Vm([FOREVER], "escapes")
    try:
        v.wait_running()
        name = 'evil\n"forged" #9\n  at forged (x.mv:1)\x1b[2J'
        out = ok(v.pid, "load", f"{lib}=noisy=1,thread={name}")
        check(re.fullmatch(r"[\n\x20-\x7e]*", out), f"control characters in {out!r}")
        check("attachwait: \\x1b[31mred\\x1b[0m\\x0dover\\x07\n" in out, repr(out))
        threads = ok(v.pid, "threads")
        check(re.fullmatch(r"[\n\x20-\x7e]*", threads), f"control characters in {threads!r}")
        check('\n"evil\\n\\"forged\\" #9\\n  at forged (x.mv:1)\\x1b[2J" agent thread\n' in threads
              and not re.search(r'^("forged"|  at forged)', threads, re.M), threads)
        agents = ok(v.pid, "agents")
        check(agents.count("\n") == 1 and re.fullmatch(r"[\n\x20-\x7e]*", agents) and
              'thread=evil\\n\\"forged\\" #9\\n' in agents, repr(agents))
        v.terminate()
    finally:
        v.kill()


@test
def attach_signals_only_marked_processes():
    """A process whose main thread blocks SIGQUIT while another thread does
    not, with or without minivm's mark (a thread named minivm-signals): the
    signal would kill it, so the client refuses, exit 1, and it lives on."""
    for with_mark, pattern in ((False, r"has no thread named 'minivm-signals'"),
                               (True, r"its thread \d+ does not block SIGQUIT")):
        code = ("import ctypes,signal,threading,time\n"
                "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n" +
                ("ctypes.CDLL(None).prctl(15, b'minivm-signals', 0, 0, 0)\n" if with_mark else "") +
                "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGQUIT])\n"
                "print('ready', flush=True)\ntime.sleep(600)\n")
        q = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             preexec_fn=default_signals)
        try:
            check(q.stdout.readline() == "ready\n", "python child")
            one_line_error(attach(q.pid, "threads"), 1,
                           rf"process {q.pid} is not a minivm VM \(.*{pattern}", f"mark {with_mark}")
            check(q.poll() is None, f"mark {with_mark}: the process was signalled: {q.returncode}")
            check(not os.path.exists(f"/tmp/minivm-attach-{os.geteuid()}/{q.pid}.trigger"),
                  "a trigger file was made")
        finally:
            q.kill()
            q.wait()


# ---- loads that block, and the VM's end ------------------------------------

@test
def attach_load_refuses_what_is_not_a_regular_file():
    """`load` of a FIFO (whose open would block dlopen, holding the loader
    lock, for ever), a device and a folder: one line naming what it is,
    exit 1; the VM answers the next request and ends on SIGTERM."""
    v = Vm([FOREVER], "not_a_file")
    try:
        v.wait_running()
        fifo = fresh("agent.fifo")
        os.mkfifo(fifo)
        for path, what in ((fifo, "a FIFO"), ("/dev/zero", "a character device"),
                           (C.work, "a folder")):
            one_line_error(attach(v.pid, "load", path), 1,
                           rf"cannot load agent '{re.escape(path)}': not a regular file \({what}\)$",
                           path)
        check("at allocate_forever" in ok(v.pid, "threads"), "threads after the refused loads")
        v.terminate()
    finally:
        v.kill()


def queued_connections(path):
    """Connections to the listening socket at path not yet accepted:
    /proc/net/unix lists the VM's end of each with the socket's path and
    state 02 (connecting) until it is accepted."""
    n = 0
    with open("/proc/net/unix") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            n += len(parts) >= 8 and parts[7] == path and parts[5] == "02"
    return n


@test
def attach_blocked_agent_does_not_keep_the_vm_alive():
    """An Agent_OnAttach that outlasts the client's 10 s: the client says the
    agent is still loading (not that the VM never answered), and once it
    returns `agents` lists it. One that never returns: a request queued
    behind it is told the VM is ending when SIGTERM ends the VM, which it
    does (143), with what an agent writes on stderr at VMDeath (stderr is
    still the blocked load's pipe) on its stderr; the agents whose
    Agent_OnAttach returned get their Agent_OnUnload, the one still in it
    does not."""
    lib = test_agent("attachwait")
    deathwait = test_agent("deathwait")
    v = Vm([FOREVER], "blocked", opts=[f"-agentpath:{deathwait}"])
    late = None
    try:
        v.wait_running()
        unloads = fresh("blocked_unloads.txt")
        later = fresh("blocked_later")  # made once the client has given up
        never = fresh("blocked_never")  # never made: the last load waits for ever
        still = (rf"process {v.pid} is still loading '.*' after 10 s: its Agent_OnAttach has not "
                 r"returned \(if it returns 0, the agent is loaded")
        ok(v.pid, "load", f"{lib}=unload={unloads}")
        one_line_error(attach(v.pid, "load", f"{lib}=wait={later}"), 1, still,
                       "a load longer than the client waits")
        check("attachwait: waiting" in v.stderr(), v.stderr())
        open(later, "w").close()
        wait_for(lambda: attach(v.pid, "agents").stdout.count("(attached)") == 2,
                 "the slow agent listed once its Agent_OnAttach returned")
        one_line_error(attach(v.pid, "load", f"{lib}=wait={never}"), 1, still,
                       "a load that never returns")
        late = subprocess.Popen([C.attach, str(v.pid), "threads"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=C.work)
        wait_for(lambda: queued_connections(socket_path(v.pid)) >= 1 or late.poll() is not None,
                 "the second request queued")
        v.p.send_signal(signal.SIGTERM)
        code = v.finish(timeout=120)
        check(code == 143, f"exit {code} after SIGTERM:\n{v.stderr()[-2000:]}")
        check("deathwait: VMDeath\ndeathwait: done\n" in v.stderr(), v.stderr()[-2000:])
        out, err = late.communicate(timeout=60)
        one_line_error(subprocess.CompletedProcess(late.args, late.returncode, out, err), 1,
                       rf"process {v.pid} ended before it replied \(the VM is ending\)$",
                       "the queued request")
        with open(unloads) as f:
            got = f.read()
        check(got == "Agent_OnUnload\n" * 2, f"Agent_OnUnload calls: {got!r}")
    finally:
        if late is not None and late.poll() is None:
            late.kill()
            late.wait()
        v.kill()


# ---- stale socket files ----------------------------------------------------

@test
def attach_socket_removed_on_every_exit():
    """The socket file goes when the VM ends through an agent's exit()
    (atexit), SIGHUP, stdout's reader gone (SIGPIPE does nothing: the
    program ends in order, exit 1) or a second SIGTERM in the middle of
    VMDeath (the immediate _exit)."""
    lib = test_agent("attachwait")
    deathwait = test_agent("deathwait")
    # exit() in Agent_OnAttach: the client is told the VM is ending. (exit()
    # runs LeakSanitizer in a sanitizer build, which would report what the
    # running VM holds, as _exit never does.)
    asan = ":".join(o for o in (os.environ.get("ASAN_OPTIONS"), "detect_leaks=0") if o)
    v = Vm([FOREVER], "exit_in_agent", env=dict(os.environ, ASAN_OPTIONS=asan))
    try:
        v.wait_running()
        path = socket_path(v.pid)
        check(os.path.exists(path), "no socket")
        one_line_error(attach(v.pid, "load", f"{lib}=exit=7"), 1, r"\(the VM is ending\)$",
                       "exit() in Agent_OnAttach")
        check(v.finish() == 7, f"exit {v.p.returncode}")
        check(not os.path.exists(path), "exit(): the socket file outlived the VM")
    finally:
        v.kill()
    # SIGHUP: no handler of the VM's, the default action.
    v = Vm([FOREVER], "sighup")
    try:
        v.wait_running()
        path = socket_path(v.pid)
        v.p.send_signal(signal.SIGHUP)
        check(v.finish() == -signal.SIGHUP, f"exit {v.p.returncode}")
        check(not os.path.exists(path), "SIGHUP: the socket file outlived the VM")
    finally:
        v.kill()
    # Stdout's reader goes while main is blocked printing to a full pipe:
    # the write fails (EPIPE; SIGPIPE's handler does nothing) and the
    # program ends as exit(1) would (docs/language.md).
    v = Vm([PHASES, "20000", "0"], "sigpipe")
    try:
        v.wait_threads(phases_stack())
        path = socket_path(v.pid)
        v.p.stdout.close()
        check(v.p.wait(timeout=120) == 1, f"exit {v.p.returncode}")
        check(not os.path.exists(path), "SIGPIPE: the socket file outlived the VM")
    finally:
        v.kill()
    # A second SIGTERM while VMDeath waits.
    never = fresh("second_signal_never")
    v = Vm([FOREVER], "second_sigterm", opts=[f"-agentpath:{deathwait}=wait={never}"])
    try:
        v.wait_running()
        path = socket_path(v.pid)
        v.p.send_signal(signal.SIGTERM)
        wait_for(lambda: "deathwait: VMDeath" in v.stderr(), "VMDeath")
        v.p.send_signal(signal.SIGTERM)
        check(v.finish() == 143, f"exit {v.p.returncode}")
        check(not os.path.exists(path), "second SIGTERM: the socket file outlived the VM")
    finally:
        v.kill()


def stale_socket(pid):
    """A socket file for pid with nobody listening, as a VM killed outright
    leaves it."""
    path = socket_path(pid)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    s.bind(path)
    s.close()
    return path


@test
def attach_stale_sockets_are_removed():
    """Files left by VMs killed with SIGKILL (or named for a pid that now
    runs another program): the next client for that pid removes them, and
    so does the next VM that starts listening."""
    a = Vm([FOREVER], "stale_a")
    try:
        a.wait_running()
        path = socket_path(a.pid)
        a.kill()
        check(os.path.exists(path), "SIGKILL left no file: the test shows nothing")
        one_line_error(attach(a.pid, "threads"), 1, rf"no process {a.pid}$", "a killed VM")
        check(not os.path.exists(path), "the client left a dead VM's socket file")
    finally:
        a.kill()
    s = subprocess.Popen(["sleep", "600"], preexec_fn=default_signals)
    s2 = subprocess.Popen(["sleep", "600"], preexec_fn=default_signals)
    b = c = None
    try:
        path = stale_socket(s.pid)
        one_line_error(attach(s.pid, "threads"), 1, "is not a minivm VM", "a reused pid")
        check(s.poll() is None and not os.path.exists(path),
              "a reused pid's stale socket file stayed (or the process was signalled)")
        # The next VM to listen sweeps the folder.
        c = Vm([FOREVER], "stale_c")
        c.wait_running()
        dead = socket_path(c.pid)
        c.kill()
        reused = stale_socket(s2.pid)
        check(os.path.exists(dead) and os.path.exists(reused), "the stale files")
        b = Vm([FOREVER], "stale_b")
        b.wait_running()
        check(not os.path.exists(dead) and not os.path.exists(reused),
              "a VM's listener left stale files in its folder")
        check(s2.poll() is None, "the other program was signalled")
        b.terminate()
    finally:
        for p in (s, s2):
            p.kill()
            p.wait()
        for v in (b, c):
            if v is not None:
                v.kill()



def main():
    ap = argparse.ArgumentParser()
    add_path_options(ap, "minivm", "attach", "heapprof", "leakcheck", "lifetimes")
    ap.add_argument("--test-agents")
    ap.add_argument("--collector", help="minivm-collector, for its --attach")
    ap.add_argument("--remote", help="libremote.so, beside minivm's agents")
    ap.add_argument("--work")
    ap.add_argument("--full-sweep", action="store_true",
                    help="the statistical test at two seeds (the Release build), else one")
    ap.add_argument("-k", action="append")
    a = ap.parse_args()
    take_paths(C, a, "minivm", "attach", "heapprof", "leakcheck", "lifetimes", "test_agents",
                  "collector", "remote")
    C.full_sweep = a.full_sweep
    C.work = work_dir(a.work, "attach_tests_")
    C.go = find_go()
    use_tsan_suppressions()
    # -agentlib: names resolve beside the agents given.
    os.environ["MINIVM_AGENT_PATH"] = os.path.dirname(C.heapprof)
    print(f"attach tests: work dir {C.work}; go: {C.go or 'not installed'}")
    return run_tests(TESTS, a.k)


if __name__ == "__main__":
    sys.exit(main())
