"""The tool agents under fake_vm (tests/tools/fake_vm.cc), a deterministic
stand-in VM whose scripted workload prints its truth: golden outputs, pprof
contents and readers, 5.7-sigma estimates, dumps, signals, thread filter,
leaks and lifetimes, option errors; and the agents' pure parts
(tools_unit_checks)."""

import json
import math
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from harness import C, ROOT, Running, check, fresh, run, test_registry
from profiles import Z, by_leaf, check_heap_profile, need_go, parse_collapsed, pprof, read_profile
from tool_helpers import (
    BAD, agent, agent_lines, check_bad, fake, golden, http_checks, need_vm, truth_of)

TESTS, test = test_registry()


# ---- pure parts ---------------------------------------------------------------

@test
def unit_checks():
    r = run([C.unit])
    check(r.returncode == 0, r.stdout + r.stderr)


# ---- fake VM: golden outputs ----------------------------------------------------

@test
def fake_heapprof_golden():
    out = fresh("fake_leak.folded")
    r = fake("leak", [agent("heapprof", f"interval=64k,format=collapsed,space=alloc,file={out}")])
    check(r.returncode == 0, r.stderr)
    summary = agent_lines(r.stderr, "heapprof").replace(out, "OUT")
    golden("fake_leak_summary.txt", summary)
    golden("fake_leak_alloc.folded", open(out).read())


@test
def fake_leakcheck_golden():
    r = fake("leak", [agent("leakcheck", "interval=16k")], scale=5)
    check(r.returncode == 0, r.stderr)
    golden("fake_leak_leakcheck.txt", agent_lines(r.stderr, "leakcheck"))


@test
def fake_lifetimes_golden():
    trace = fresh("fake_trace.jsonl")
    r = fake("leak", [agent("lifetimes", f"interval=64k,trace={trace}")])
    check(r.returncode == 0, r.stderr)
    golden("fake_leak_lifetimes.txt", agent_lines(r.stderr, "lifetimes"))
    lines = open(trace).read().splitlines()
    golden("fake_leak_trace_head.jsonl", "".join(l + "\n" for l in lines[:20]))


# ---- fake VM: pprof contents and readers -------------------------------------------

@test
def fake_pprof_contents():
    out = fresh("fake.pb.gz")
    folded = fresh("fake.folded")
    r = fake("leak", [agent("heapprof", f"interval=64k,file={out}")])
    check(r.returncode == 0, r.stderr)
    check(f"heapprof: wrote {out} (open with: go tool pprof -http=: {out})" in r.stderr, r.stderr)
    prof = read_profile(out)
    check_heap_profile(prof)
    check(prof["period"] == 65536, f"period {prof['period']}")
    # one Location per distinct (function, line)
    seen = set()
    for lines in prof["locations"].values():
        check(len(lines) == 1, "one Line per Location")
        key = (lines[0][0], lines[0][2])
        check(key not in seen, f"duplicate location {key}")
        seen.add(key)
    # the leaf of a leaking site, with file and line
    leaves = by_leaf(prof, 3)
    check(leaves.get("remember fake.mv:31", 0) > 0, f"inuse by leaf: {leaves}")
    check({s["labels"]["thread"] for s in prof["samples"]} == {"main", "thread-1"}, "threads")
    check("Entry" in {s["labels"]["class"] for s in prof["samples"]}, "classes")
    # the same run in collapsed form agrees (rounding per line aside)
    r = fake("leak", [agent("heapprof", f"interval=64k,format=collapsed,file={folded}")])
    col = parse_collapsed(open(folded).read())
    total_pb = sum(s["values"][3] for s in prof["samples"])
    check(abs(sum(col.values()) - total_pb) <= len(prof["samples"]),
          f"collapsed inuse {sum(col.values())} vs pprof {total_pb}")
    check(all(k.startswith("main:") for k in col), "collapsed stacks are root first")


@test
def fake_go_pprof_reads():
    need_go()
    out = fresh("fake_go.pb.gz")
    r = fake("leak", [agent("heapprof", f"interval=64k,file={out}")])
    check(r.returncode == 0, r.stderr)
    top = pprof(["-top", out])
    check("Type: inuse_space" in top and "remember" in top, top)
    raw = pprof(["-raw", out])
    check("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]"
          in raw, raw[:2000])
    check(re.search(r"remember fake\.mv:31", raw), "Locations carry file:line")
    traces = pprof(["-traces", out])
    check(re.search(r"class:\s+Entry", traces) and re.search(r"thread:\s+thread-1", traces),
          traces[:2000])
    lines = pprof(["-top", "-lines", "-sample_index=alloc_space", out])
    check("fake.mv:12" in lines and "Type: alloc_space" in lines, lines)
    focus = pprof(["-top", "-tagfocus=class=Entry", out])
    check("remember" in focus and "render" not in focus, focus)
    focus_t = pprof(["-top", "-tagfocus=thread=thread-1", "-sample_index=alloc_objects", out])
    check("Type: alloc_objects" in focus_t, focus_t)
    # diff against an earlier, smaller run
    base = fresh("fake_base.pb.gz")
    fake("leak", [agent("heapprof", f"interval=64k,file={base}")], scale=1, seed=2,
         extra=["--young=1048576"])
    diff = pprof(["-top", f"-diff_base={base}", out])
    check("Showing nodes" in diff, diff)


@test
def fake_go_pprof_web_ui():
    need_go()
    out = fresh("fake_web.pb.gz")
    fake("leak", [agent("heapprof", f"interval=64k,file={out}")])
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, HOME=C.work, PPROF_TMPDIR=C.work)
    p = subprocess.Popen([C.go, "tool", "pprof", "-no_browser", f"-http=127.0.0.1:{port}", out],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=C.work)
    try:
        ok = {}
        deadline = time.time() + 60
        for page in ["/ui/top", "/ui/flamegraph", "/ui/source", "/ui/peek"]:
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{page}", timeout=10) as r:
                        ok[page] = (r.status, r.read())
                    break
                except (urllib.error.URLError, ConnectionError):
                    if time.time() > deadline:
                        raise AssertionError(f"pprof web UI did not answer {page}")
                    time.sleep(0.3)
        for page, (status, body) in ok.items():
            check(status == 200 and b"remember" in body, f"{page}: {status}")
    finally:
        p.kill()
        p.wait()


# ---- fake VM: statistics ------------------------------------------------------------

@test
def fake_estimates_within_bounds():
    """Per-site alloc_space and alloc_objects vs the truth, 5.7 sigma (HT variance)."""
    checks = 0
    for seed in (11, 12, 13):
        out = fresh(f"fake_stat_{seed}.pb.gz")
        r = fake("mixed", [agent("heapprof", f"interval=64k,file={out},top=0")], seed=seed)
        check(r.returncode == 0, r.stderr)
        truth = truth_of(r.stdout)
        prof = read_profile(out)
        got_b = by_leaf(prof, 1)
        got_o = by_leaf(prof, 0)
        for site, t in truth.items():
            for got, want, var, what in ((got_b.get(site, 0), t["bytes"], t["bytes_var"], "bytes"),
                                         (got_o.get(site, 0), t["objects"], t["objects_var"],
                                          "objects")):
                sd = math.sqrt(var) + 1  # +1: values are rounded per aggregate
                z = (got - want) / sd
                check(abs(z) <= Z, f"seed {seed} site {site} {what}: estimate {got}, truth {want},"
                                   f" sd {sd:.1f}, z = {z:.2f}")
                checks += 1
    print(f"    {checks} checks, seeds 11 12 13, |z| <= {Z}")


# ---- fake VM: HTTP, dumps, signals, thread filter ----------------------------------------

@test
def fake_http_endpoint():
    r = Running([C.fake_vm, "--workload=leak", "--spin=6",
                 agent("heapprof", f"interval=64k,http=0,file={fresh('fake_http.pb.gz')}")])
    r.wait_port()
    try:
        http_checks(r, "remember")
    finally:
        code, err = r.finish()
    check(code == 0, err)


@test
def fake_dump_every():
    d = fresh("dumps")
    os.makedirs(d)
    r = fake("leak", [agent("heapprof", f"interval=64k,dump_every=4m,file={d}/heap.pb.gz")])
    check(r.returncode == 0, r.stderr)
    files = sorted(os.listdir(d))
    est = sum(t["bytes"] for t in truth_of(r.stdout).values())
    n = len([f for f in files if re.fullmatch(r"heap\.\d{4}\.pb\.gz", f)])
    # one dump per 4 MiB of estimated allocation (the estimate is within a few %)
    want = est / (4 << 20)
    check(abs(n - want) <= 2 + 0.1 * want, f"{n} dumps for {est} bytes: {files}")
    check("heap.0001.pb.gz" in files and "heap.pb.gz" in files, files)
    # With gc=1 a dump is copied when the worker takes it, after the
    # collection it forces, which stops the workload as a safepoint would:
    # two dumps taken back to back may see the same samples.
    a, b = read_profile(f"{d}/heap.0001.pb.gz"), read_profile(f"{d}/heap.0002.pb.gz")
    check(sum(s["values"][1] for s in a["samples"]) <= sum(s["values"][1] for s in b["samples"]),
          "later dumps have allocated no less")


@test
def fake_sigusr2_and_control_file():
    d = fresh("sig")
    os.makedirs(d)
    ctl = os.path.join(d, "dump-now")
    r = Running([C.fake_vm, "--workload=leak", "--spin=5",
                 agent("heapprof", f"interval=64k,http=0,control={ctl},file={d}/h.pb.gz")])
    r.wait_port()
    try:
        time.sleep(0.5)
        r.p.send_signal(signal.SIGUSR2)
        r.wait_for(r"heapprof: wrote \S+h\.0001\.pb\.gz \(SIGUSR2", timeout=10)
        open(ctl, "w").close()
        r.wait_for(r"heapprof: wrote \S+h\.0002\.pb\.gz \(control file", timeout=10)
        check(not os.path.exists(ctl), "control file removed after the dump")
    finally:
        code, err = r.finish()
    check(code == 0, err)
    check_heap_profile(read_profile(f"{d}/h.0001.pb.gz"))


@test
def fake_thread_filter():
    out = fresh("fake_thr.pb.gz")
    r = fake("leak", [agent("heapprof", f"interval=64k,threads=thread-1,file={out}")])
    check(r.returncode == 0, r.stderr)
    threads = {s["labels"]["thread"] for s in read_profile(out)["samples"]}
    check(threads == {"thread-1"}, f"threads {threads}")


# ---- fake VM: leaks and lifetimes -------------------------------------------------------

@test
def fake_leakcheck_finds_leak_not_steady():
    r = fake("leak", [agent("leakcheck", "interval=16k")], scale=5, seed=3)
    check(r.returncode == 0, r.stderr)
    check("LEAK? remember fake.mv:31 [Entry]" in r.stderr and
          "LEAK? handle fake.mv:21 [String]" in r.stderr, r.stderr)
    check("LEAK? render" not in r.stderr and "LEAK? make_tree" not in r.stderr, r.stderr)
    for seed in (1, 2, 3, 4, 5):
        r = fake("steady", [agent("leakcheck", "interval=16k,every=20")], scale=5, seed=seed)
        check(r.returncode == 0, r.stderr)
        check("LEAK?" not in r.stderr, f"seed {seed}: false positive:\n{r.stderr}")
        check("at exit: 0 growing sites" in r.stderr, r.stderr)


@test
def fake_leakcheck_gc_every():
    """No natural collection at all: the agent forces full ones, on its
    schedule or every gc_every bytes."""
    for opts in ("interval=16k", "interval=16k,gc_every=4m"):
        r = fake("leak", [agent("leakcheck", opts)], scale=5, seed=6,
                 extra=["--young=100000000000"])
        check(r.returncode == 0, r.stderr)
        check("LEAK? remember fake.mv:31 [Entry]" in r.stderr, f"{opts}:\n{r.stderr}")
        r = fake("steady", [agent("leakcheck", opts)], scale=5, seed=6,
                 extra=["--young=100000000000"])
        check("at exit: 0 growing sites" in r.stderr, f"{opts}:\n{r.stderr}")


@test
def fake_lifetimes_lifecycle_exact():
    """Interval 0: every allocation is sampled; the lifecycle is exact."""
    trace = fresh("fake_life0.jsonl")
    # Exact at any length: outside the Release build's full sweep a fifth of
    # the rounds (still about 20 collections) keeps TSan's run short.
    rounds = [] if C.full_sweep else ["--rounds=4000"]
    r = fake("leak", [agent("lifetimes", f"interval=0,trace={trace}")],
             extra=["--young=262144", *rounds])
    check(r.returncode == 0, r.stderr)
    truth = truth_of(r.stdout)
    state, counts = {}, {"alloc": 0, "promote": 0, "free": 0}
    last_t = 0
    for line in open(trace):
        e = json.loads(line)
        if e["ev"] == "end":
            break
        counts[e["ev"]] += 1
        check(e["t_bytes"] >= last_t, "t_bytes never decreases")
        last_t = e["t_bytes"]
        i = e["id"]
        if e["ev"] == "alloc":
            check(i not in state and e["weight"] == e["size"], f"alloc {e}")
            state[i] = "alloc"
        elif e["ev"] == "promote":
            check(state.get(i) == "alloc", f"promote of {i} in state {state.get(i)}")
            state[i] = "promote"
        else:
            check(state.get(i) in ("alloc", "promote"), f"free of {i} in state {state.get(i)}")
            state[i] = "free"
    check(counts["alloc"] == sum(t["objects"] for t in truth.values()),
          f"{counts} vs truth {sum(t['objects'] for t in truth.values())}")
    alive = sum(1 for s in state.values() if s != "free")
    check(counts["alloc"] == counts["free"] + alive, "alloc = free + alive")
    rep = agent_lines(r.stderr, "lifetimes")
    # make_tree objects survive two collections: all promoted, none die young
    # (those still young at exit, allocated since the last collection, are alive)
    m = re.search(r"\s(\d+\.\d)%\s+(\d+\.\d)%\s+(\d+\.\d)%.*make_tree fake\.mv:5", rep)
    check(m and m.group(1) == "0.0" and float(m.group(2)) > 95, rep)
    # render's objects die at the first collection: all young deaths, none promoted
    m = re.search(r"\s(\d+\.\d)%\s+(\d+\.\d)%\s+(\d+\.\d)%.*render fake\.mv:12", rep)
    check(m and float(m.group(1)) > 95 and m.group(2) == "0.0", rep)


@test
def fake_three_agents_together():
    """Three environments at once: each sees every sample and follows its own tags."""
    out = fresh("fake_three.pb.gz")
    r = fake("leak", [agent("heapprof", f"interval=32k,file={out}"), agent("leakcheck", "every=10"),
                      agent("lifetimes", "interval=16k")], scale=5, seed=4)
    check(r.returncode == 0, r.stderr)
    check("leakcheck: periodic:" in r.stderr, "periodic leakcheck reports")
    check(re.search(r"LEAK\? (remember fake\.mv:31 \[Entry\]|handle fake\.mv:21 \[String\])",
                    r.stderr), r.stderr)
    check(re.search(r"lifetimes: .* make_tree fake\.mv:5 \[Node\]", r.stderr), r.stderr)
    prof = read_profile(out)
    check_heap_profile(prof)
    check(prof["period"] == 16384, f"the last interval set wins: {prof['period']}")


# ---- bad options -------------------------------------------------------------------------

@test
def fake_bad_options():
    for name, opts in BAD.items():
        for opt in opts:
            check_bad(lambda a: [C.fake_vm, a], name, opt)


# ---- one option parser: the same mistake reads the same in every agent ----------------

# (options, what the one line says after "NAME: "); every agent declares interval first
# and has depth from 1 to 4096 and file= (an output checked at load).
SAME_MISTAKES = [
    ("depth=3,depth=4", "bad option 'depth=4': depth is given twice"),
    ("depth", "bad option 'depth': missing value (want a frame count from 1 to 4096)"),
    ("depth=", "bad option 'depth': missing value (want a frame count from 1 to 4096)"),
    ("depth=0", "bad option 'depth=0': want a frame count from 1 to 4096"),
    ("interval=1q", "bad option 'interval=1q': want bytes from 0 to 2147483647, e.g. "),
    ("a=1,,b=2", "bad option '': want key=value options separated by commas"),
    ("=3", "bad option '=3': want key=value options separated by commas"),
    ("bogus=1", "bad option 'bogus=1': unknown option (known: interval, "),
    ("file=/nonexistent/dir/x",
     "bad option 'file=/nonexistent/dir/x': cannot write /nonexistent/dir/x: directory "
     "/nonexistent/dir does not exist"),
]


@test
def fake_option_errors_are_uniform():
    """heapprof, leakcheck and lifetimes word each kind of mistake the same way:
    one line naming the agent and the option, and a failed load."""
    for opt, want in SAME_MISTAKES:
        for name in ("heapprof", "leakcheck", "lifetimes"):
            r = run([C.fake_vm, agent(name, opt)], timeout=60)
            lines = [l for l in r.stderr.splitlines() if l.startswith(name + ":")]
            check(r.returncode != 0, f"{name}={opt}: exit code 0")
            check(len(lines) == 1 and lines[0].startswith(f"{name}: {want}"),
                  f"{name}={opt}: want one line starting {name}: {want!r}, got:\n{r.stderr}")


@test
def vm_option_errors_exit_1():
    """On the real VM each mistake stops the VM before the program runs, exit code 1."""
    need_vm()
    hello = os.path.join(ROOT, "examples", "programs", "hello.mv")
    for opt, want in SAME_MISTAKES:
        r = run([C.minivm, agent("leakcheck", opt), hello], timeout=60)
        check(r.returncode == 1 and "hello" not in r.stdout,
              f"leakcheck={opt}: exit {r.returncode}, stdout {r.stdout!r}")
        check(r.stderr.startswith(f"leakcheck: {want}"), f"leakcheck={opt}:\n{r.stderr}")
