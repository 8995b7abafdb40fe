"""leakcheck and lifetimes: no false positives over programs and heaps,
leaks found, several instances, outputs, JSON, and leakcheck's paths to GC
roots (docs/tools.md, "Why is it still alive")."""

import concurrent.futures
import json
import os
import re
import shutil
import subprocess

from harness import C, HERE, ROOT, Skip, check, fresh, path, run, test_registry
from tool_helpers import SMALL_YOUNG, agent, agent_lines, fake, need_vm, vm

TESTS, test = test_registry()


NO_LEAK = [  # (program, arguments): steady states, phases, threads, long lifetimes
    ("examples/programs/binary_trees.mv", ["13"]),
    ("examples/programs/word_count.mv", ["2000"]),
    ("examples/programs/worker_pool.mv", ["4", "2000"]),
    ("tests/tools/steady.mv", []),
    ("tests/tools/long_lived.mv", ["300000"]),
    ("benchmarks/programs/alloc_loop.mv", []),
    ("benchmarks/programs/binary_trees.mv", ["13"]),
]
HEAPS = [[], ["--young=4m"], ["--heap=64m"]]  # the default, a small young gen, a small heap
LEAKY_SITES = ("render", "remember", "handle")  # leaky_cache.mv's leaking functions


def run_all(cmds, timeout=600):
    """Runs the commands two at a time (the CI machine has two cores)."""
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        return list(ex.map(lambda c: run(c, timeout=timeout), cmds))


def full_or_reduced(full, reduced):
    return full if C.full_sweep else reduced


@test
def vm_leakcheck_no_false_positives():
    """Programs without a leak: no report names a site, at any seed or heap."""
    need_vm()
    seeds = full_or_reduced(range(1, 21), (1,))
    heaps = full_or_reduced(HEAPS, HEAPS[:1])
    runs = [(prog, args, heap, seed) for prog, args in NO_LEAK for heap in heaps
            for seed in seeds]
    results = run_all([[C.minivm, *heap, f"--seed={seed}", agent("leakcheck"),
                        os.path.join(ROOT, prog), *args] for prog, args, heap, seed in runs])
    judged = {}
    for (prog, args, heap, seed), r in zip(runs, results):
        what = f"minivm {' '.join(heap)} --seed={seed} -agentlib:leakcheck {prog} {' '.join(args)}"
        check(r.returncode == 0, f"{what}: exit {r.returncode}\n{r.stderr[-2000:]}")
        check("LEAK?" not in r.stderr, f"{what}: false positive\n{agent_lines(r.stderr, 'leakcheck')}")
        check("leakcheck: at exit: " in r.stderr, f"{what}: no report\n{r.stderr[-2000:]}")
        judged[prog] = judged.get(prog, 0) + ("leakcheck:     window:" in r.stderr)
    # A program never judged would prove nothing (with one run each, the
    # pacer may hold back a slow one: then most must be judged).
    if C.full_sweep:
        for prog, _ in NO_LEAK:
            check(judged.get(prog, 0) > 0, f"{prog}: too few snapshots in every run")
    check(2 * sum(judged.values()) >= len(runs), f"judged only {judged}")
    print(f"    {len(runs)} runs ({len(seeds)} seeds x {len(heaps)} heaps x {len(NO_LEAK)} "
          f"programs), {sum(judged.values())} judged, no site reported")


@test
def vm_leakcheck_finds_leaky_cache():
    """The default invocation finds leaky_cache.mv's leak at every seed (and
    with the other heaps at a few), and names only sites that leak."""
    need_vm()
    prog = os.path.join(ROOT, "examples", "programs", "leaky_cache.mv")
    runs = [([], seed) for seed in full_or_reduced(range(1, 21), (1, 2))]
    runs += [(heap, seed) for heap in full_or_reduced(HEAPS[1:], []) for seed in (1, 2, 3)]
    results = run_all([[C.minivm, *heap, f"--seed={seed}", agent("leakcheck"), prog]
                       for heap, seed in runs])
    for (heap, seed), r in zip(runs, results):
        what = f"minivm {' '.join(heap)} --seed={seed} -agentlib:leakcheck leaky_cache.mv"
        check(r.returncode == 0, f"{what}: exit {r.returncode}\n{r.stderr[-2000:]}")
        sites = re.findall(r"LEAK\? (\w+) ", r.stderr)
        check(sites, f"{what}: leak not found\n{agent_lines(r.stderr, 'leakcheck')}")
        check(all(s in LEAKY_SITES for s in sites), f"{what}: a site that does not leak\n"
              f"{agent_lines(r.stderr, 'leakcheck')}")
    print(f"    {len(runs)} runs, the leak found in each")


@test
def vm_leakcheck_too_few_collections():
    """A program too short to judge says so and names nothing."""
    need_vm()
    r = vm([agent("leakcheck"), os.path.join(ROOT, "examples", "programs", "word_count.mv")],
           seed=1)
    check(r.returncode == 0, r.stderr)
    check("leakcheck: at exit: too few snapshots to judge growth" in r.stderr and
          "LEAK?" not in r.stderr, r.stderr)


@test
def fake_leakcheck_pacer():
    """Full collections that take long (50 ms of the fake VM's virtual clock,
    which allocates 1 byte per ns) are held back so that their pauses stay
    under half of the run's time once they add up to a quarter second; the
    leak is still found. Pauses that add up to less are never held back,
    whatever their share (short runs' wall-clock shares are scheduling
    noise)."""
    r = fake("leak", [agent("leakcheck", "interval=16k")], scale=20, seed=2,
             extra=["--young=100000000000", "--gc-ns=50000000"])
    check(r.returncode == 0, r.stderr)
    m = re.search(r"(\d+) full collections forced by leakcheck \(([\d.]+) ms, ([\d.]+)% of "
                  r"([\d.]+) s; (\d+) more held back to stay under 50%\)", r.stderr)
    check(m, f"no pacer line:\n{r.stderr}")
    forced, ms, run_s = int(m.group(1)), float(m.group(2)), float(m.group(4))
    check(abs(ms - 50 * forced) < 0.1, f"{forced} collections of 50 ms: {ms} ms")
    check(ms > 250, f"the pacer held back before a quarter second of pauses: {ms} ms")
    # Each starts only while the pauses so far are under a quarter second or
    # half the time, so they exceed the larger by one pause at most.
    check(ms <= max(250, 500 * run_s * 1.001) + 50, f"{ms} ms of pauses in {run_s} s")
    check("LEAK? handle fake.mv:21 [String]" in r.stderr, r.stderr)
    r = fake("leak", [agent("leakcheck", "interval=16k")], scale=5, seed=2,
             extra=["--young=100000000000", "--gc-ns=20000000"])
    check(r.returncode == 0, r.stderr)
    m = re.search(r"(\d+) full collections forced by leakcheck \(([\d.]+) ms, ([\d.]+)% of "
                  r"([\d.]+) s\)", r.stderr)
    check(m and float(m.group(2)) < 250 + 20 and float(m.group(3)) > 50,
          f"pauses under a quarter second, over half the run, none held back:\n{r.stderr}")
    check("LEAK? handle fake.mv:21 [String]" in r.stderr, r.stderr)


def two_instances(name, opts_a, opts_b, prog_args, seed=1, opts=()):
    a, b = fresh(f"two_{name}_a.txt"), fresh(f"two_{name}_b.txt")
    r = vm([agent(name, f"file={a}{opts_a}"), agent(name, f"file={b}{opts_b}"), *prog_args],
           seed=seed, opts=opts)
    check(r.returncode == 0, f"exit {r.returncode}:\n{r.stderr}")
    check(not agent_lines(r.stderr, name), f"reports went to files, yet:\n{r.stderr}")
    return open(a).read(), open(b).read()


@test
def vm_agents_loaded_twice():
    """An agent loaded twice is two independent tools: own options, own output."""
    need_vm()
    prog = os.path.join(ROOT, "examples", "programs", "leaky_cache.mv")
    ra, rb = two_instances("leakcheck", "", ",confidence=0.99,depth=2", [prog])
    for text, conf, depth in ((ra, "0.01%", 3), (rb, "1%", 2)):
        check(f"at most a {conf} chance" in text and "LEAK? " in text, text)
        chains = re.findall(r"allocated at (.*)", text)
        check(chains and all(len(c.split(" <- ")) <= depth for c in chains) and
              any(len(c.split(" <- ")) == depth for c in chains), f"depth {depth}:\n{text}")
    ta, tb = fresh("two_a.jsonl"), fresh("two_b.jsonl")
    prog = os.path.join(ROOT, "examples", "programs", "binary_trees.mv")
    ra, rb = two_instances("lifetimes", f",trace={ta},top=1", f",trace={tb}", [prog, "12"],
                           opts=SMALL_YOUNG)
    rows = [len([l for l in t.splitlines() if re.search(r"\[\w+\]$", l)]) for t in (ra, rb)]
    check(rows == [1, 2], f"top=1 and the default top: {rows} site rows\n{ra}\n{rb}")
    # The same samples (both at the default interval: nothing is thinned),
    # each instance with its own ids.
    traces = [[json.loads(l) for l in open(t)] for t in (ta, tb)]
    for t in traces:
        check(t and t[-1]["ev"] == "end", "a complete trace")
    allocs = [[(e["t_bytes"], e["size"], e["site"]) for e in t if e["ev"] == "alloc"]
              for t in traces]
    check(allocs[0] == allocs[1] and len(allocs[0]) > 10, "both instances saw the same samples")


BAD_DIR = "/nonexistent/dir/x"


@test
def vm_outputs_checked_at_load():
    """A path that cannot be written stops the VM before the program runs:
    exit 1 and one line naming the option."""
    need_vm()
    hello = os.path.join(ROOT, "examples", "programs", "hello.mv")
    d = fresh("outdir")
    os.makedirs(d)
    cases = [("leakcheck", "file", BAD_DIR, f"cannot write {BAD_DIR}: directory "
              "/nonexistent/dir does not exist"),
             ("lifetimes", "file", BAD_DIR, "does not exist"),
             ("lifetimes", "trace", BAD_DIR, "does not exist"),
             ("leakcheck", "file", d, "is a directory"),
             ("lifetimes", "trace", d, "is a directory")]
    for name, key, value, reason in cases:
        r = vm([agent(name, f"{key}={value}"), hello])
        lines = [l for l in r.stderr.splitlines() if l.startswith(name + ":")]
        check(r.returncode == 1 and "hello" not in r.stdout,
              f"{name} {key}={value}: exit {r.returncode}, stdout {r.stdout!r}")
        check(len(lines) == 1 and lines[0].startswith(f"{name}: bad option '{key}={value}': ")
              and reason in lines[0], f"{name} {key}={value}:\n{r.stderr}")


@test
def vm_outputs_write_errors():
    """A write that fails is reported in one line at exit, the report follows
    on stderr, and the run exits 1 (the program's own output is kept)."""
    need_vm()
    if not os.path.exists("/dev/full"):
        raise Skip("no /dev/full")
    prog = os.path.join(ROOT, "examples", "programs", "binary_trees.mv")
    full = "cannot write /dev/full: No space left on device"
    r = vm([agent("leakcheck", "file=/dev/full"), prog, "12"], seed=1)
    check(r.returncode == 1, r.stderr)
    check("long lived tree of depth 12" in r.stdout, f"program output lost: {r.stdout!r}")
    check(f"leakcheck: {full}; the report follows\nleakcheck: at exit:" in r.stderr, r.stderr)
    r = vm([agent("lifetimes", "file=/dev/full"), prog, "12"], seed=1)
    check(r.returncode == 1, r.stderr)
    check(f"lifetimes: {full}; the report follows\nlifetimes: " in r.stderr, r.stderr)
    r = vm([agent("lifetimes", "trace=/dev/full"), prog, "12"], seed=1)
    check(r.returncode == 1, r.stderr)
    check(f"lifetimes: {full} (after 0 bytes); the trace is incomplete\n" in r.stderr, r.stderr)
    # A reader that goes away: EPIPE, not SIGPIPE for the program.
    fifo = fresh("trace.fifo")
    os.mkfifo(fifo)
    p = subprocess.Popen([C.minivm, agent("lifetimes", f"trace={fifo},interval=4k"), prog, "14"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=C.work)
    with open(fifo, "rb") as f:
        first = f.readline()
    out, err = p.communicate(timeout=300)
    check(json.loads(first)["ev"] == "alloc", f"first line {first!r}")
    check(p.returncode == 1, f"exit {p.returncode}:\n{err}")
    check(re.search(r"lifetimes: cannot write \S+trace\.fifo: Broken pipe \(after \d+ bytes\); "
                    r"the trace is incomplete", err), err)


@test
def vm_outputs_follow_symlinks():
    """A symlink is followed: its target gets the output, the link stays."""
    need_vm()
    d = fresh("links")
    os.makedirs(os.path.join(d, "real"))
    names = ["leak.txt", "life.txt", "trace.jsonl"]
    for n in names:
        os.symlink(os.path.join("real", n), os.path.join(d, n))
    prog = os.path.join(ROOT, "examples", "programs", "binary_trees.mv")
    r = vm([agent("leakcheck", f"file={d}/leak.txt"),
            agent("lifetimes", f"file={d}/life.txt,trace={d}/trace.jsonl"), prog, "12"],
           seed=1, opts=SMALL_YOUNG)
    check(r.returncode == 0, r.stderr)
    for n in names:
        check(os.path.islink(os.path.join(d, n)), f"{n} replaced")
    check(open(f"{d}/real/leak.txt").read().startswith("leakcheck: at exit:"), "leakcheck report")
    check(open(f"{d}/real/life.txt").read().startswith("lifetimes: "), "lifetimes report")
    check(json.loads(open(f"{d}/real/trace.jsonl").readline())["ev"] == "alloc", "trace")


@test
def vm_lifetimes_no_frees_shows_dash():
    """A site with no freed sample shows '-' (no lifetime seen), not 0 B."""
    need_vm()
    prog = os.path.join(ROOT, "examples", "programs", "binary_trees.mv")
    r = vm([agent("lifetimes"), prog, "12"], seed=1)  # the default heap: no collection
    check(r.returncode == 0, r.stderr)
    rows = [l for l in r.stderr.splitlines() if re.search(r"make \S+:\d+ \[Node\]$", l)]
    check(rows and all(re.search(r"\s-\s+-\s+-\s+make ", l) for l in rows), r.stderr)
    r = vm([agent("lifetimes"), prog, "12"], seed=1, opts=SMALL_YOUNG)
    rows = [l for l in r.stderr.splitlines() if re.search(r"make \S+:\d+ \[Node\]$", l)]
    check(rows and not any(re.search(r"\s-\s+-\s+-\s+make ", l) for l in rows), r.stderr)


AWKWARD = "\"q\\b\x01\n\t\x7f\ufffd\ufffd("  # fake_vm --awkward-names, as JSON decodes it


@test
def fake_lifetimes_json_awkward_names():
    """Names with quotes, backslashes, control characters and invalid UTF-8
    in every field: each trace line parses, invalid bytes become U+FFFD."""
    trace = fresh("fake_awkward.jsonl")
    # The text report has the raw names: bytes, not text.
    r = subprocess.run([C.fake_vm, "--workload=leak", "--seed=1", "--awkward-names",
                        agent("lifetimes", f"interval=16k,trace={trace}")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    check(r.returncode == 0, r.stderr.decode(errors="replace"))
    events = [json.loads(l) for l in open(trace, "rb")]
    allocs = [e for e in events if e["ev"] == "alloc"]
    check(allocs and events[-1]["ev"] == "end", "a complete trace")
    for e in allocs:
        check(e["class"].endswith(AWKWARD) and e["thread"].endswith(AWKWARD), f"{e}")
        fn, _, rest = e["site"].partition(AWKWARD + " ")
        check(fn in ("render", "handle", "remember", "make_tree") and
              re.fullmatch(r"fake\.mv" + re.escape(AWKWARD) + r":\d+", rest), f"{e}")


@test
def vm_lifetimes_json_awkward_file_name():
    """A program file whose name has a quote, a backslash, control
    characters and a byte that is not UTF-8: each trace line parses."""
    need_vm()
    d = fresh("awkward")
    os.makedirs(d)
    name = os.path.join(os.fsencode(d), b'tr"ee\\s\x01\n\t\xff.mv')
    shutil.copy(os.path.join(ROOT, "examples", "programs", "binary_trees.mv"), name)
    trace = fresh("vm_awkward.jsonl")
    r = subprocess.run([os.fsencode(C.minivm), b"--seed=1", b"--young=2m",
                        os.fsencode(agent("lifetimes", f"trace={trace}")), name, b"12"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=C.work, timeout=300)
    check(r.returncode == 0, r.stderr.decode(errors="replace"))
    events = [json.loads(l) for l in open(trace, "rb")]
    sites = {e["site"] for e in events if e["ev"] == "alloc"}
    want = d + '/tr"ee\\s\x01\n\t\ufffd.mv:'
    check(sites and all(s.startswith("make " + want) for s in sites), f"{sites}")
    check(events[-1]["ev"] == "end", "a complete trace")



# ---- leakcheck: paths to GC roots (docs/tools.md, "Why is it still alive") -----------------

RETAINED = re.compile(r"^leakcheck:     retained by: (.*)$", re.M)
PATHS_LINE = re.compile(r"^leakcheck:     paths to GC roots: ([\d,]+) objects visited in a pause "
                        r"of ([\d.]+) ms(, cut off)? \(budget ([\d,]+) objects, ([\d.]+) s\)$", re.M)


def leak_sites_with_paths(stderr):
    """(site line, retained-by text) for every reported site, in order."""
    out = []
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("leakcheck: LEAK? "):
            continue
        path = None
        for follow in lines[i + 1:]:
            if follow.startswith("leakcheck: LEAK? "):
                break
            m = RETAINED.match(follow)
            if m:
                path = m.group(1)
                break
        out.append((line, path))
    return out


@test
def vm_leakcheck_paths_leaky_cache():
    """The true retention path of leaky_cache.mv's leak at every seed: every
    reported site is retained through the global cache, its bucket array and
    entries, and the Entry site's own objects through the bucket array (and
    maybe Entry.next links, folded)."""
    need_vm()
    prog = os.path.join(ROOT, "examples", "programs", "leaky_cache.mv")
    entry = re.compile(r"^global cache -> Cache\.buckets -> Array\[\d+\] -> "
                       r"(Entry\.next( x [\d,]+)? -> )?Entry \(allocated at remember "
                       r"\S*leaky_cache\.mv:69\)$")
    # Four seeds; the Release build's --full-sweep runs twenty.
    for seed in range(1, 21) if C.full_sweep else (1, 2, 3, 4):
        # path_seconds: a time budget no build reaches, so that timing never
        # decides whether a path is found (a sanitizer build walks slower).
        r = vm(["--verbose:gc", agent("leakcheck", "interval=16k,path_seconds=600"), prog,
                "60000"], seed=seed, opts=SMALL_YOUNG)
        check(r.returncode == 0, f"--seed={seed}: {r.stderr[-3000:]}")
        sites = leak_sites_with_paths(r.stderr)
        check(sites, f"--seed={seed}: no site reported\n{r.stderr[-3000:]}")
        for site, path in sites:
            check(path is not None and path.startswith(
                "global cache -> Cache.buckets -> Array["),
                f"--seed={seed}: {site}: retained by {path!r}")
            if "LEAK? remember " in site:
                check(entry.match(path), f"--seed={seed}: Entry path {path!r}")
        m = PATHS_LINE.search(r.stderr)
        check(m and m.group(3) is None, f"--seed={seed}: no pause line:\n{r.stderr[-2000:]}")
        # The VM logs the search's walks as pauses (--verbose:gc).
        check(re.search(r"^\[gc\] heap walk \(from the roots\) \d+ roots, \d+ objects, "
                        r"\d+ references(, aborted)? [\d.]+ms$", r.stderr, re.M),
              f"--seed={seed}: no heap walk line in the gc log")


@test
def vm_leakcheck_paths_thread_local():
    """A leak held only by a thread's local variable: the path names the
    thread, the function (with its line) and the local."""
    need_vm()
    prog = os.path.join(HERE, "leak_local.mv")
    for seed in (1, 2):
        r = vm([agent("leakcheck", "interval=32k,path_seconds=600"), prog, "40000"], seed=seed,
               opts=SMALL_YOUNG)
        check(r.returncode == 0, r.stderr[-3000:])
        sites = leak_sites_with_paths(r.stderr)
        hoarded = [(s, p) for s, p in sites if re.search(r"LEAK\? hoard \S*leak_local\.mv:16 ", s)]
        check(hoarded, f"--seed={seed}: the hoard sites not reported:\n{r.stderr[-3000:]}")
        for site, path in hoarded:
            check(path is not None and re.match(
                # Line 22 or 23: the VM may end before thread-1 reaches its spin.
                r"^local kept of hoard \(leak_local\.mv:2[23]\) on thread thread-1 -> "
                r"(Item\.next( x [\d,]+)? -> )?(Item|Item\.payload -> Bytes) \(allocated at "
                r"hoard \S*leak_local\.mv:16\)$", path), f"--seed={seed}: {site}: path {path!r}")


@test
def vm_leakcheck_paths_budget_and_off():
    """Beyond the budget the path is reported as cut off (and the pause
    still stated); paths=off prints none."""
    need_vm()
    prog = os.path.join(ROOT, "examples", "programs", "leaky_cache.mv")
    r = vm([agent("leakcheck", "interval=16k,path_objects=3"), prog, "60000"], seed=1,
           opts=SMALL_YOUNG)
    check(r.returncode == 0, r.stderr[-3000:])
    sites = leak_sites_with_paths(r.stderr)
    check(sites and all(p == "not found within the search budget (cut off)" for _, p in sites),
          f"path_objects=3: {sites}")
    m = PATHS_LINE.search(r.stderr)
    check(m and m.group(1) == "3" and m.group(3) == ", cut off" and m.group(4) == "3",
          f"path_objects=3: pause line:\n{r.stderr[-2000:]}")
    r = vm([agent("leakcheck", "interval=16k,paths=off"), prog, "60000"], seed=1,
           opts=SMALL_YOUNG)
    check(r.returncode == 0 and "LEAK? " in r.stderr, r.stderr[-3000:])
    check("retained by" not in r.stderr and "paths to GC roots" not in r.stderr, r.stderr[-3000:])
