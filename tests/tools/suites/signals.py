"""minivm ending by SIGINT / SIGTERM (docs/tools.md, "Stopping a profiled
program"): real signals to a real minivm with the agents loaded."""

import json
import os
import re
import signal
import subprocess

from harness import C, HERE, ROOT, check, fresh, path, run, test_registry
from profiles import by_leaf, check_heap_profile, pprof, read_profile
from tool_helpers import (
    GC_LINE, SIGNAL_OPTS, Signalled, _default_signal_actions, agent, check_forever_stdout,
    need_test_agent, need_vm)

TESTS, test = test_registry()


def _ignore_sigint():
    _default_signal_actions()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


SIGNAL_CODES = ((signal.SIGINT, 130), (signal.SIGTERM, 143))
FOREVER = os.path.join(HERE, "forever.mv")


def check_profile_names(out, fn, threads=("main",)):
    prof = read_profile(out)
    check_heap_profile(prof)
    alloc = by_leaf(prof, 1, key=lambda fr: fr[0])
    check(alloc.get(fn, 0) > 0, f"{out}: no {fn} in {alloc}")
    seen = {s["labels"]["thread"] for s in prof["samples"]}
    check(set(threads) <= seen, f"{out}: threads {seen}, want {threads}")
    if C.go:
        top = pprof(["-sample_index=alloc_space", "-top", out])
        check(fn in top, top)


@test
def vm_signal_heap_profile():
    """Ctrl-C (and SIGTERM) on a profiled program: exit 130 (143), the whole
    profile written and readable, the summary on stderr, stdout flushed."""
    need_vm()
    for sig, code in SIGNAL_CODES:
        out = fresh(f"vm_sig_{code}.pb.gz")
        r = Signalled([*SIGNAL_OPTS, f"--heap-profile={out}", FOREVER], f"vm_sig_{code}")
        r.wait_for(GC_LINE, count=10)
        r.send(sig)
        got = r.finish()
        err = r.stderr()
        check(got == code, f"{sig.name}: exit code {got}, want {code}\n{err[-2000:]}")
        check("heapprof: top sites by allocated bytes:" in err, err[-2000:])
        check(re.search(r"heapprof: +\S+ \S+ +\d+ +allocate_forever \S*forever\.mv:16", err),
              f"no allocate_forever site in the summary:\n{err[-2000:]}")
        check(f"heapprof: wrote {out}" in err, err[-2000:])
        check_profile_names(out, "allocate_forever")
        check_forever_stdout(r, sig.name)


@test
def vm_signal_threads_and_join():
    """Several threads allocating, or main blocked in join: all stop, every
    thread's samples are in the profile (interpreted and compiled loops)."""
    need_vm()
    d = fresh("vm_sig_thr")
    os.makedirs(d)
    for jit, extra in (("auto", []), ("eager", ["join"])):
        out = f"{d}/{jit}.pb.gz"
        r = Signalled([f"--jit={jit}", "--seed=1",
                       agent("heapprof", f"interval=16k,dump_every=64m,file={out}"),
                       FOREVER, "3", *extra], f"vm_sig_thr_{jit}")
        threads = ["thread-1", "thread-2", "thread-3"] if extra else ["main", "thread-1", "thread-2"]
        # Dumps until one has samples from every thread: each has run its loop.
        n = 0
        while True:
            n += 1
            r.wait_for(r"heapprof: wrote \S+\.\d{4}\.pb\.gz", count=n)
            dump = re.findall(r"heapprof: wrote (\S+\.\d{4}\.pb\.gz)", r.stderr())[n - 1]
            seen = {s["labels"]["thread"] for s in read_profile(dump)["samples"]}
            if set(threads) <= seen:
                break
        r.send(signal.SIGINT)
        got = r.finish()
        check(got == 130, f"--jit={jit}: exit code {got}\n{r.stderr()[-2000:]}")
        check_profile_names(out, "allocate_forever", threads)
        check_forever_stdout(r, f"--jit={jit} {' '.join(extra)}")


@test
def vm_signal_leakcheck_and_lifetimes():
    need_vm()
    report = fresh("vm_sig_leak.txt")
    r = Signalled([*SIGNAL_OPTS, agent("leakcheck", f"file={report}"), FOREVER, "2"],
                  "vm_sig_leak")
    r.wait_for(GC_LINE, count=10)
    r.send(signal.SIGINT)
    got = r.finish()
    check(got == 130, f"leakcheck: exit code {got}\n{r.stderr()[-2000:]}")
    text = open(report).read()
    check(text.startswith("leakcheck: at exit:"), f"leakcheck report:\n{text}")
    trace, life = fresh("vm_sig_trace.jsonl"), fresh("vm_sig_life.txt")
    r = Signalled([*SIGNAL_OPTS, agent("lifetimes", f"trace={trace},file={life}"), FOREVER, "2"],
                  "vm_sig_life")
    r.wait_for(GC_LINE, count=10)
    r.send(signal.SIGTERM)
    got = r.finish()
    check(got == 143, f"lifetimes: exit code {got}\n{r.stderr()[-2000:]}")
    check(re.search(r"allocate_forever \S*forever\.mv:16 \[(Item|Bytes)\]", open(life).read()),
          f"lifetimes report:\n{open(life).read()}")
    events = [json.loads(l) for l in open(trace)]
    check(events and events[-1]["ev"] == "end", f"trace does not end with 'end': {events[-1:]}")
    check(sum(e["ev"] == "alloc" for e in events) > 0, "no alloc events")


@test
def vm_signal_without_agent():
    """No agent: Ctrl-C still exits 130 with stdout flushed; reading the
    program from a pipe that never ends still ends at once; a SIGINT ignored
    by the parent stays ignored."""
    need_vm()
    for sig, code in SIGNAL_CODES:
        for jit in ("auto", "eager"):
            r = Signalled([*SIGNAL_OPTS, f"--jit={jit}", FOREVER], f"vm_sig_plain_{code}")
            r.wait_for(GC_LINE)
            r.send(sig)
            got = r.finish()
            check(got == code, f"{sig.name} --jit={jit}: exit code {got}")
            check_forever_stdout(r, f"{sig.name} --jit={jit}")
    # `minivm /dev/stdin` blocked reading a program nobody writes.
    r = Signalled(["/dev/stdin"], "vm_sig_stdin", stdin=subprocess.PIPE)
    try:
        r.wait_signals_blocked()
        r.send(signal.SIGINT)
        got = r.finish()
    finally:
        r.p.stdin.close()
    check(got == 130, f"reading the program from stdin: exit code {got}")
    # Started with SIGINT ignored (`prog &` in a script): SIGINT is not taken.
    # SIGINT goes first, so had it been taken the code would be 130.
    r = Signalled([*SIGNAL_OPTS, FOREVER], "vm_sig_ign", preexec=_ignore_sigint)
    r.wait_for(GC_LINE)
    r.send(signal.SIGINT)
    r.send(signal.SIGTERM)
    got = r.finish()
    check(got == 143, f"SIGINT ignored at start, then SIGTERM: exit code {got}")


@test
def vm_signal_second_signal_ends_at_once():
    """deathwait holds VMDeath until a file appears: a second signal then
    ends the process at once (no profile); without one, every agent finishes
    (heapprof after deathwait), and VMDeath on the signal thread can force a
    collection."""
    need_vm()
    dw = need_test_agent("deathwait")
    for second, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143), (None, 130)):
        gate = fresh("vm_sig_gate")
        out = fresh("vm_sig_slow.pb.gz")
        r = Signalled([*SIGNAL_OPTS, f"{dw}=wait={gate},gc=1", f"--heap-profile={out}", FOREVER],
                      "vm_sig_slow")
        r.wait_for(GC_LINE, count=10)
        r.send(signal.SIGINT)
        # Past its collection: deathwait now waits for the gate.
        r.wait_for(r"deathwait: ForceGarbageCollection -?\d+\n")
        if second is not None:
            r.send(second)
        else:
            open(gate, "w").close()
        got = r.finish()
        err = r.stderr()
        what = f"SIGINT then {second.name if second else 'nothing'}"
        check(got == code, f"{what}: exit code {got}, want {code}\n{err[-2000:]}")
        check("deathwait: ForceGarbageCollection 0\n" in err, f"{what}:\n{err[-2000:]}")
        if second is not None:
            check("deathwait: done" not in err and "heapprof: wrote" not in err,
                  f"{what}: VMDeath went on after the second signal:\n{err[-2000:]}")
        else:
            check("deathwait: done" in err and f"heapprof: wrote {out}" in err, err[-2000:])
            check_profile_names(out, "allocate_forever")
        check_forever_stdout(r, what)


@test
def vm_signal_during_program_end():
    """A signal while the program is already ending (exit(3), VMDeath held
    by deathwait): the end goes on with its own code; a second signal ends
    at once."""
    need_vm()
    dw = need_test_agent("deathwait")
    ends = os.path.join(HERE, "ends.mv")
    for second in (None, signal.SIGTERM):
        gate = fresh("vm_sig_gate")
        r = Signalled([f"{dw}=wait={gate}", ends, "exit", "1000"], "vm_sig_end")
        r.wait_for(r"deathwait: VMDeath\n")
        r.send(signal.SIGINT)
        if second is None:
            open(gate, "w").close()
            want = (3,)
        else:
            r.send(second)
            want = (130, 143)  # whichever the dispatcher takes second ends it
        got = r.finish()
        err = r.stderr()
        check(got in want, f"SIGINT then {second}: exit code {got}, want {want}\n{err}")
        check(("deathwait: done" in err) == (second is None), err)


@test
def vm_signal_races_with_program_end():
    """SIGINT about when the program ends by itself (main returns, exit(n),
    a runtime error, in main or another thread): exactly one end: one
    VMDeath with nothing after it (the ordering agent), one exit code, either
    the signal's or the program's."""
    need_vm()
    ordering = need_test_agent("ordering")
    ends = os.path.join(HERE, "ends.mv")
    own = {"return": 0, "exit": 3, "error": 1, "thread_exit": 4, "thread_error": 1}
    seen = {}
    for how, code in own.items():
        for n in (10000, 160000):
            r = Signalled([*SIGNAL_OPTS, f"{ordering}=daemon=1,interval=65536", ends, how,
                           str(n)], "vm_sig_race")
            r.wait_for(GC_LINE, exit_ok=True)
            r.send(signal.SIGINT)
            got = r.finish()
            out = r.stdout()
            what = f"ends.mv {how} {n}"
            check(got in (code, 130), f"{what}: exit code {got}, want {code} or 130\n"
                                      f"{r.stderr()[-2000:]}")
            check(out == "vmdeath\nPASS ordering\n", f"{what}: stdout {out!r}")
            seen[got == 130] = seen.get(got == 130, 0) + 1
    print(f"    ended by the signal {seen.get(True, 0)} times, by the program "
          f"{seen.get(False, 0)} times")


@test
def vm_signal_at_startup():
    """SIGINT as soon as minivm takes signals, while it compiles, loads the
    agent or starts the program: exit 130, and either no VMDeath (VMInit had
    not completed; the ordering agent, which reports from Agent_OnUnload
    after VMDeath, prints nothing) or one VMDeath after VMInit."""
    need_vm()
    ordering = need_test_agent("ordering")
    outs = set()
    for i in range(4):
        r = Signalled([f"{ordering}=daemon=1,interval=65536", FOREVER], "vm_sig_start")
        r.wait_signals_blocked()
        r.send(signal.SIGINT)
        got = r.finish()
        out = re.sub(r"^line \d+\n", "", r.stdout(), flags=re.M)
        check(got == 130, f"run {i}: exit code {got}\n{r.stderr()[-2000:]}")
        check(out in ("", "vmdeath\nPASS ordering\n"), f"run {i}: stdout {out!r}")
        outs.add(out)
    print(f"    agent output seen: {sorted(outs)}")


@test
def vm_signal_agent_thread():
    """SIGTERM (and SIGINT) while the heapsampler test agent's sweeper, an
    agent thread (RunAgentThread), forces collections and sample callbacks
    wait on its raw monitor for them: VMDeath, on the signal thread, stops
    the sweeper through the monitor (its wait returns INTERRUPT or it is
    told), forces a last collection and reports. Exit 143 (130), the
    agent's verdict PASS, never a hang."""
    need_vm()
    hs = need_test_agent("heapsampler")
    for sig, code in SIGNAL_CODES:
        r = Signalled([*SIGNAL_OPTS, f"{hs}=interval=4096,gc_every=50,wait_every=70", FOREVER, "3"],
                      f"vm_sig_agent_thread_{code}")
        # Twenty collections: over 70 samples whichever caused them, so at
        # least one callback has waited for the sweeper's collection.
        r.wait_for(GC_LINE, count=20)
        r.send(sig)
        got = r.finish()
        out = re.sub(r"^line \d+\n", "", r.stdout(), flags=re.M)
        check(got == code, f"{sig.name}: exit code {got}, want {code}\n{r.stderr()[-2000:]}")
        check("PASS heapsampler\n" in out, f"{sig.name}: stdout {out!r}")
        # A callback that had waited may be stopped for good by the signal's
        # VM death before it checks its handle (it parks on re-entering the
        # VM), at most one per allocating thread (3): so ok <= waited <= ok + 3.
        m = re.search(r"callbacks: waited for a collection (\d+), handles ok (\d+)\n", out)
        check(m and 1 <= int(m[2]) <= int(m[1]) <= int(m[2]) + 3,
              f"{sig.name}: no callback waited for a collection and kept its handle: {out!r}")


@test
def vm_agent_path_search():
    """MINIVM_AGENT_PATH: a colon-separated list searched in order for
    -agentlib:NAME, then the VM's own agent folder."""
    need_vm()
    d = fresh("vm_agent_path")
    a, b, empty = (os.path.join(d, x) for x in ("a", "b", "empty"))
    for x in (a, b, empty):
        os.makedirs(x)
    os.symlink(C.leakcheck, os.path.join(a, "libpick.so"))
    os.symlink(C.lifetimes, os.path.join(b, "libpick.so"))
    prog = os.path.join(ROOT, "examples", "programs", "hello.mv")

    def run_with(path, *args):
        env = dict(os.environ, MINIVM_AGENT_PATH=path)
        return run([C.minivm, *args, prog], env=env)

    for path, want in ((f"{a}:{b}", "leakcheck:"), (f"{b}:{a}", "lifetimes:"),
                       (f"{empty}::{b}:", "lifetimes:")):
        r = run_with(path, "-agentlib:pick")
        check(r.returncode == 0 and r.stderr.startswith(want),
              f"MINIVM_AGENT_PATH={path}: exit {r.returncode}, want {want} output:\n{r.stderr}")
    # Not in the list: the VM's own folder (build tree: beside minivm).
    r = run_with(f"{empty}:{a}", "-agentlib:heapprof=file=")
    check(r.returncode == 0 and "heapprof:" in r.stderr, r.stderr)
    # Nowhere: one line naming the file and every folder searched.
    r = run_with(f"{empty}:{a}", "-agentlib:nosuch")
    lines = r.stderr.splitlines()
    check(r.returncode == 1 and len(lines) == 1 and "libnosuch.so" in lines[0] and
          empty in lines[0] and a in lines[0] and os.path.dirname(C.minivm) in lines[0],
          f"exit {r.returncode}:\n{r.stderr}")
