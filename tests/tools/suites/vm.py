"""The tool agents under minivm on real programs: profiles and estimates,
leakcheck and lifetimes, heapprof as a new user meets it (live data, several
instances, outputs, dumps), the class histogram and retention labels."""

import json
import math
import os
import re
import stat

from harness import C, HERE, ROOT, Running, Skip, check, fresh, path, run, test_registry
from profiles import (
    Z, by_leaf, check_heap_profile, check_site_estimates, need_go, pprof, read_profile)
from tool_helpers import (
    BAD, SMALL_YOUNG, agent, check_bad, comments_of, golden, http_checks, need_vm, vm)

TESTS, test = test_registry()


# ---- the real VM ------------------------------------------------------------------------

@test
def vm_bad_options():
    need_vm()
    prog = os.path.join(ROOT, "examples", "programs", "hello.mv")
    for name, opts in BAD.items():
        for opt in opts:
            check_bad(lambda a: [C.minivm, a, prog], name, opt)
            r = run([C.minivm, agent(name, opt), prog])
            check(r.returncode == 1, f"{name}={opt}: exit code {r.returncode}, want 1")


@test
def vm_heapprof_leaky_cache():
    need_vm()
    d = fresh("vm_cache")
    os.makedirs(d)
    out = f"{d}/heap.pb.gz"
    prog = os.path.join(ROOT, "examples", "programs", "leaky_cache.mv")
    r = vm([agent("heapprof", f"interval=64k,file={out},dump_every=8m"), prog, "60000"], seed=1)
    check(r.returncode == 0, r.stderr)
    check(f"heapprof: wrote {out} (open with: go tool pprof -http=: {out})" in r.stderr, r.stderr)
    check("heapprof: top sites by live bytes:" in r.stderr and
          "heapprof: top sites by allocated bytes:" in r.stderr, r.stderr)
    prof = read_profile(out)
    check_heap_profile(prof)
    inuse = by_leaf(prof, 3, key=lambda fr: fr[0])
    top = max(inuse, key=inuse.get)
    check(top in ("render", "remember", "handle", "make_request"), f"inuse by function {inuse}")
    check(all(fr[1].endswith("leaky_cache.mv") and fr[2] > 0
              for l in prof["locations"].values() for fr in l), "file and line on every frame")
    dumps = sorted(f for f in os.listdir(d) if re.fullmatch(r"heap\.\d{4}\.pb\.gz", f))
    check(len(dumps) >= 2, f"dumps {dumps}")
    if not C.go:
        print("    (go not installed: pprof readers not checked)")
        return
    pprof(["-top", out])
    pprof(["-traces", out])
    lines = pprof(["-top", "-lines", out])
    check("leaky_cache.mv:" in lines, lines)
    focus = pprof(["-top", "-tagfocus=class=Entry", out])
    check("remember" in focus, focus)
    diff = pprof(["-top", f"-diff_base={d}/{dumps[0]}", out])
    check("Showing nodes" in diff, diff)


@test
def vm_heapprof_golden_collapsed():
    need_vm()
    out = fresh("vm_leaky.folded")
    r = vm([agent("heapprof", f"interval=64k,format=collapsed,space=alloc,file={out}"),
            os.path.join(HERE, "leaky.mv"), "100000"], seed=7)
    check(r.returncode == 0, r.stderr)
    golden("vm_leaky_alloc.folded", open(out).read())


@test
def vm_estimates_within_bounds():
    """sizes.mv allocates known bytes per function; per-site estimates within 5.7 sigma."""
    need_vm()
    interval = 65536
    sizes = {"small": (400000, 32), "medium": (40000, 1024), "large": (200, 200024)}
    checks = 0
    for seed in (21, 22):
        out = fresh(f"vm_sizes_{seed}.pb.gz")
        r = vm([agent("heapprof", f"interval={interval},file={out},top=0"),
                os.path.join(HERE, "sizes.mv")], seed=seed)
        check(r.returncode == 0, r.stderr)
        checks += check_site_estimates(read_profile(out), sizes, interval, seed)
    print(f"    {checks} checks, --seed=21 and 22, |z| <= {Z}")


@test
def vm_leakcheck():
    need_vm()
    r = vm([agent("leakcheck", "interval=32k"), os.path.join(HERE, "leaky.mv")], seed=1,
           opts=SMALL_YOUNG)
    check(r.returncode == 0, r.stderr)
    check(re.search(r"LEAK\? open_session \S+leaky\.mv:\d+", r.stderr), r.stderr)
    check("LEAK? scratch" not in r.stderr, r.stderr)
    # the same with the default heap, collections forced by the agent
    r = vm([agent("leakcheck", "interval=32k,gc_every=8m"), os.path.join(HERE, "leaky.mv")],
           seed=2)
    check(r.returncode == 0, r.stderr)
    check(re.search(r"LEAK\? open_session \S+leaky\.mv:\d+", r.stderr), r.stderr)
    prog = os.path.join(ROOT, "examples", "programs", "leaky_cache.mv")
    r = vm([agent("leakcheck", "interval=16k,every=10"), prog, "100000"], seed=1,
           opts=SMALL_YOUNG)
    check(r.returncode == 0, r.stderr)
    check("leakcheck: periodic:" in r.stderr, r.stderr)
    check(re.search(r"LEAK\? (render|remember|handle) ", r.stderr), r.stderr)
    for seed in (1, 2, 3):
        r = vm([agent("leakcheck", "interval=32k"), os.path.join(HERE, "steady.mv")], seed=seed,
               opts=SMALL_YOUNG)
        check(r.returncode == 0, r.stderr)
        check("LEAK?" not in r.stderr and "0 growing sites" in r.stderr,
              f"--seed={seed} steady.mv:\n{r.stderr}")
    r = vm([agent("leakcheck", "interval=32k,gc_every=8m"), os.path.join(HERE, "steady.mv")],
           seed=4)
    check("LEAK?" not in r.stderr and "0 growing sites" in r.stderr, f"gc_every:\n{r.stderr}")


@test
def vm_lifetimes():
    need_vm()
    trace = fresh("vm_trace.jsonl")
    prog = os.path.join(ROOT, "examples", "programs", "binary_trees.mv")
    r = vm([agent("lifetimes", f"interval=16k,trace={trace}"), prog, "14"], seed=1,
           opts=SMALL_YOUNG)
    check(r.returncode == 0, r.stderr)
    check(re.search(r"lifetimes: .* make \S+binary_trees\.mv:\d+ \[Node\]", r.stderr), r.stderr)
    state = {}
    for line in open(trace):
        e = json.loads(line)
        if e["ev"] == "alloc":
            check(e["id"] not in state, "one alloc per id")
            state[e["id"]] = "alloc"
        elif e["ev"] == "promote":
            check(state.get(e["id"]) == "alloc", f"promote after alloc, once: {e}")
            state[e["id"]] = "promote"
        elif e["ev"] == "free":
            check(state.get(e["id"]) in ("alloc", "promote"), f"free after alloc, once: {e}")
            state[e["id"]] = "free"
    check(len(state) > 100, f"{len(state)} samples")


@test
def vm_http_endpoint():
    need_vm()
    r = Running([C.minivm, agent("heapprof", "interval=64k,http=0,file="),
                 os.path.join(HERE, "spin.mv"), "6"])
    r.wait_port()
    try:
        http_checks(r, "churn")
    finally:
        code, err = r.finish()
    check(code == 0, err)


# ---- heapprof as a new user meets it: live data, several instances, outputs ------------

LEAKY = os.path.join(ROOT, "examples", "programs", "leaky_cache.mv")


@test
def vm_default_quickstart_inuse_names_leak():
    # The README's quickstart with no tuning: the default heap never collects
    # on its own, so only the forced collection makes in-use data live.
    need_vm()
    d = fresh("vm_quick")
    os.makedirs(d)
    out = f"{d}/heap.pb.gz"
    r = vm([f"--heap-profile={out}", LEAKY, "60000"], seed=3)
    check(r.returncode == 0, r.stderr)
    check(re.search(r"MiB live after a full collection at exit", r.stderr), r.stderr)
    prof = read_profile(out)
    inuse = by_leaf(prof, 3, key=lambda fr: fr[0])
    alloc = by_leaf(prof, 1, key=lambda fr: fr[0])
    total = sum(inuse.values())
    # make_request's objects (the requests) are all garbage once handled:
    # after a full collection nothing of them is live; the cache (render's
    # responses, remember's entries, handle's keys) is.
    check(inuse.get("make_request", 0) <= 0.02 * total, f"churn counted live: {inuse}")
    check(sum(inuse.get(f, 0) for f in ("render", "remember", "handle")) >= 0.95 * total,
          f"inuse {inuse}")
    check(total < 0.6 * sum(alloc.values()), f"live {total} of allocated {sum(alloc.values())}")
    if C.go:
        top = pprof(["-top", "-sample_index=inuse_space", out])
        first = [l for l in top.splitlines() if re.match(r"\s*[\d.]+[kMG]?B\s", l)][0]
        check(first.split()[-1] in ("render", "remember"), top)
        check(any("inuse: objects reachable at a full collection" in c for c in comments_of(out)),
              "comment on liveness")


@test
def vm_gc0_says_as_of_when():
    need_vm()
    out = fresh("vm_gc0.pb.gz")
    r = vm([agent("heapprof", f"file={out},gc=0"), LEAKY, "20000"])
    check(r.returncode == 0, r.stderr)
    check("(no collection has run: every sampled object counts as live)" in r.stderr, r.stderr)
    r = vm(["--young=1m", agent("heapprof", f"file={out},gc=0"), LEAKY, "20000"])
    check(re.search(r"live as of the last collection \(#\d+, [\d.]+ s before this\)", r.stderr),
          r.stderr)
    if C.go:
        check(any("as of the last collection" in c for c in comments_of(out)), "gc=0 comment")


@test
def vm_every_pair_of_agents_loads():
    # An agent library loaded twice is two independent tools (dlopen shares
    # the library, not the instance); every pair, the same agent included.
    need_vm()
    d = fresh("vm_pairs")
    os.makedirs(d)
    specs = {
        "heap-profile": lambda i: [f"--heap-profile={d}/hp{i}.pb.gz"],
        "heapprof": lambda i: [agent("heapprof", f"file={d}/ha{i}.pb.gz,top=1")],
        "leakcheck": lambda i: [agent("leakcheck", f"file={d}/lc{i}.txt")],
        "lifetimes": lambda i: [agent("lifetimes", f"file={d}/lt{i}.txt,trace={d}/tr{i}.jsonl")],
    }
    outputs = {"heap-profile": "hp{}.pb.gz", "heapprof": "ha{}.pb.gz", "leakcheck": "lc{}.txt",
               "lifetimes": "lt{}.txt"}
    names = sorted(specs)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i:]]
    for a, b in pairs:
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        r = vm(["--young=2m", *specs[a](1), *specs[b](2), LEAKY, "5000"], seed=1)
        check(r.returncode == 0, f"{a} + {b}: exit {r.returncode}\n{r.stderr}")
        for name, i in ((a, 1), (b, 2)):
            f = os.path.join(d, outputs[name].format(i))
            check(os.path.exists(f) and os.path.getsize(f) > 0, f"{a} + {b}: no {f}\n{r.stderr}")
            if f.endswith(".pb.gz"):
                check_heap_profile(read_profile(f))
    print(f"    {len(pairs)} pairs")


@test
def vm_heapprof_bad_paths_fail_at_load():
    need_vm()
    prog = os.path.join(ROOT, "examples", "programs", "hello.mv")
    for opt in ("file=/nonexistent/dir/x.pb.gz", f"file={C.work}", "control=/nonexistent/d/c"):
        r = vm([agent("heapprof", opt), prog])
        check(r.returncode == 1, f"{opt}: exit {r.returncode}, want 1\n{r.stderr}")
        check(r.stdout == "", f"{opt}: the program ran: {r.stdout!r}")
        first = r.stderr.splitlines()[0]
        check(first.startswith(f"heapprof: bad option '{opt.split('=')[0]}=") and
              "cannot" in first, f"{opt}: {r.stderr}")
    r = vm([f"--heap-profile=/nonexistent/dir/x.pb.gz", prog])
    check(r.returncode == 1 and r.stdout == "", f"--heap-profile: {r.returncode}\n{r.stderr}")


@test
def vm_agentlib_not_found_says_where_it_looked():
    # -agentlib:NAME not found: one line listing the folders searched, and,
    # when MINIVM_AGENT_PATH is not set, the two ways to point elsewhere.
    need_vm()
    prog = os.path.join(ROOT, "examples", "programs", "hello.mv")
    env = {k: v for k, v in os.environ.items() if k != "MINIVM_AGENT_PATH"}
    r = run([C.minivm, "-agentlib:nosuchagent", prog], env=env)
    check(r.returncode == 1 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.stderr)
    check("no libnosuchagent.so in " in r.stderr and
          "(MINIVM_AGENT_PATH adds folders; -agentpath takes a path)" in r.stderr, r.stderr)
    r = run([C.minivm, "-agentlib:nosuchagent", prog], env={**env, "MINIVM_AGENT_PATH": "/nonexistent/a"})
    check(r.returncode == 1 and "no libnosuchagent.so in /nonexistent/a, " in r.stderr and
          "MINIVM_AGENT_PATH adds" not in r.stderr, r.stderr)


@test
def vm_heapprof_writes_devices_in_place_and_follows_symlinks():
    need_vm()
    prog = os.path.join(ROOT, "examples", "programs", "hello.mv")
    # /dev/null stays a device (written in place, never replaced by rename).
    r = vm([agent("heapprof", "file=/dev/null,top=0"), prog])
    check(r.returncode == 0, r.stderr)
    check(stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null was replaced")
    # /dev/full: ENOSPC is one line, nothing claims it was written, exit 1.
    r = vm([agent("heapprof", "file=/dev/full,top=0"), prog])
    check(r.returncode == 1, f"/dev/full: exit {r.returncode}\n{r.stderr}")
    check("heapprof: cannot write /dev/full: No space left on device" in r.stderr, r.stderr)
    check("wrote /dev/full" not in r.stderr, r.stderr)
    check(r.stdout == "hello, world\n", f"program output lost: {r.stdout!r}")
    # A symlink is followed: the link stays, its target gets the profile.
    d = fresh("vm_symlink")
    os.makedirs(f"{d}/real")
    os.symlink("real/target.pb.gz", f"{d}/link.pb.gz")
    r = vm([agent("heapprof", f"file={d}/link.pb.gz,top=0"), LEAKY, "2000"])
    check(r.returncode == 0, r.stderr)
    check(os.path.islink(f"{d}/link.pb.gz"), "the symlink was replaced")
    check_heap_profile(read_profile(f"{d}/real/target.pb.gz"))
    check(not [f for f in os.listdir(f"{d}/real") if ".tmp" in f], "temporary file left")


@test
def vm_heapprof_gdump():
    # jemalloc's prof_gdump: a dump each time the live estimate after a
    # collection exceeds the previous maximum by the fraction. The program
    # is single-threaded, so each dump's state is exactly what was compared.
    need_vm()
    d = fresh("vm_gdump")
    os.makedirs(d)
    r = vm(["--young=2m", agent("heapprof", f"interval=64k,file={d}/h.pb.gz,gdump=0.5,top=0"),
            LEAKY, "60000"], seed=2)
    check(r.returncode == 0, r.stderr)
    lines = re.findall(r"heapprof: wrote (\S+) \(gdump, est\. [\d.]+ \w+ live after collection", r.stderr)
    check(len(lines) >= 3, f"gdump dumps: {r.stderr}")
    live = [sum(s["values"][3] for s in read_profile(p)["samples"]) for p in lines]
    for a, b in zip(live, live[1:]):
        check(b > 1.5 * a * 0.999, f"live {live}: each dump must exceed the previous by 50%")
    if C.go:
        check(any("high-water mark" in c for c in comments_of(lines[-1])), "gdump comment")


@test
def vm_numbered_dumps_after_full_collection():
    need_vm()
    d = fresh("vm_dumps_gc")
    os.makedirs(d)
    r = vm([agent("heapprof", f"interval=64k,file={d}/h.pb.gz,dump_every=4m,top=0"),
            LEAKY, "40000"], seed=1)
    check(r.returncode == 0, r.stderr)
    dumps = sorted(f for f in os.listdir(d) if re.fullmatch(r"h\.\d{4}\.pb\.gz", f))
    check(len(dumps) >= 2, f"dumps {dumps}\n{r.stderr}")
    for f in dumps:
        prof = read_profile(f"{d}/{f}")
        inuse = by_leaf(prof, 3, key=lambda fr: fr[0])
        check(inuse.get("make_request", 0) <= 0.05 * max(1, sum(inuse.values())),
              f"{f}: garbage counted live: {inuse}")
        if C.go:
            check(any("full collection run just before" in c for c in comments_of(f"{d}/{f}")),
                  f"{f}: comment")


@test
def vm_profile_names_the_program():
    need_vm()
    need_go()
    d = fresh("vm_names")
    os.makedirs(d)
    out = f"{d}/heap.pb.gz"
    rel = os.path.relpath(LEAKY, C.work)
    r = vm([f"--heap-profile={out}", rel, "3000"])
    check(r.returncode == 0, r.stderr)
    top = pprof(["-top", out])
    check("File: leaky_cache.mv" in top, top)  # pprof shows the mapping's base name
    check(read_profile(out)["mapping_file"] == rel, "the main mapping names the program")
    comments = comments_of(out)
    check(any(c.startswith("command: ") and c.endswith(f"{rel} 3000") for c in comments),
          f"comments {comments}")
    prof = read_profile(out)
    files = {fr[1] for l in prof["locations"].values() for fr in l}
    check(files == {"leaky_cache.mv"}, f"frame files {files}")
    src = os.path.dirname(LEAKY)
    listing = pprof(["-list=render", f"-source_path={src}", out])
    check("var body = " in listing, listing)  # the source of the sampled line


@test
def vm_minimal_agent_exact_and_twice():
    # examples/agents/minimal, the tutorial's agent: at interval 0 every
    # allocation is a sample of weight = size, so its table is exact; loaded
    # twice, each instance keeps its own table (environment local storage)
    # and its own interval: the second one, at the default 512 KiB, sees a
    # thinned stream of what the first samples.
    need_vm()
    prog = path("minimal_counts.mv")
    with open(prog, "w") as f:
        f.write("class P { a, b }\n"
                "fn main() {\n"
                "  var keep = array(1000);\n"
                "  for (var i = 0; i < 1000; i = i + 1) { keep[i] = new P(i, i); }\n"
                "  print(len(keep));\n"
                "}\n")
    lib = os.path.join(os.path.dirname(C.minivm), "libminimal.so")
    if not os.path.exists(lib):
        raise Skip(f"no {lib}")
    r = vm([f"-agentpath:{lib}=0", f"-agentpath:{lib}=0", prog])
    check(r.returncode == 0, r.stderr)
    tables = r.stdout.split("class ")[1:]
    check(len(tables) == 2, f"want two tables:\n{r.stdout}")
    for t in tables:
        rows = {l.split()[0]: l.split()[1:] for l in t.splitlines()[1:] if l.strip()}
        check(rows.get("P") == ["1000", "1000", "32000"], f"P row {rows.get('P')}:\n{r.stdout}")
        check(rows.get("Array") == ["1", "1", "8024"], f"Array row {rows.get('Array')}")
    # Beside it, an instance at the default interval: the first stays exact.
    r = vm([f"-agentpath:{lib}=0", f"-agentpath:{lib}", prog])
    check(r.returncode == 0, r.stderr)
    first = r.stdout.split("class ")[1]
    rows = {l.split()[0]: l.split()[1:] for l in first.splitlines()[1:] if l.strip()}
    check(rows.get("P") == ["1000", "1000", "32000"], f"P row beside 512 KiB {rows.get('P')}")


@test
def vm_thread_filter_descendants():
    # statmemprof's rule through threads=NAME+: thread-1 and every thread it
    # spawns, directly or not, are sampled; nothing else is. Each sampled
    # thread's estimate of its Blob bytes is within Z standard deviations of
    # the truth (Horvitz-Thompson variance N s^2 (1-p)/p, docs/sampling.md).
    need_vm()
    n, size, interval = 40000, 32, 4096
    prog = os.path.join(HERE, "descendants.mv")
    for seed in (31, 32):
        out = fresh(f"vm_desc{seed}.pb.gz")
        r = vm([agent("heapprof", f"interval={interval},threads=thread-1+,file={out},top=0"),
                prog, str(n)], seed=seed)
        check(r.returncode == 0, r.stderr)
        check(r.stdout.strip() == str(7 * n), r.stdout)
        est = {}
        for smp in read_profile(out)["samples"]:
            if smp["labels"]["class"] == "Blob":
                t = smp["labels"]["thread"]
                est[t] = est.get(t, 0) + smp["values"][1]
        want = {"thread-1", "thread-2", "thread-3", "thread-4"}
        check(set(est) == want, f"seed {seed}: sampled threads {sorted(est)}, want {sorted(want)}")
        p = 1 - math.exp(-size / interval)
        sd = math.sqrt(n * size * size * (1 - p) / p)
        for t, b in sorted(est.items()):
            z = (b - n * size) / sd
            check(abs(z) <= Z, f"seed {seed} {t}: {b} B, truth {n * size}, z = {z:.2f}")
    print(f"    seeds 31 32, |z| <= {Z}")
    r = vm([agent("heapprof", "threads=+main"), prog, "10"])
    check(r.returncode == 1 and "heapprof: bad option 'threads=+main'" in r.stderr, r.stderr)


# ---- heapprof: the class histogram (jmap -histo:live) -------------------------------------

@test
def vm_heapprof_class_histogram():
    """histo=all: the live objects and bytes per class agree exactly with the
    counts tests/tools/histo.mv makes itself (objects held by globals, a
    list, a thread's result; garbage not counted), in both tiers; histo=2
    keeps the two largest classes; a bad value is one clear error."""
    need_vm()
    prog = os.path.join(HERE, "histo.mv")
    row = re.compile(r"^heapprof: +\d+: +([\d,]+) +([\d,]+)  (\S+)$", re.M)
    for opts in ([], ["--jit=eager"]):
        r = vm([*opts, "--verbose:gc", agent("heapprof", "histo=all,file="), prog, "3"], seed=1)
        check(r.returncode == 0, r.stderr[-2000:])
        want = {l.split()[0]: (int(l.split()[1]), int(l.split()[2]))
                for l in r.stdout.splitlines() if l.split()[0] in ("Leaf", "Pair", "Wide")}
        got = {m.group(3): (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")))
               for m in row.finditer(r.stderr)}
        check(len(want) == 3, r.stdout)
        for cls, counts in want.items():
            check(got.get(cls) == counts, f"{opts} {cls}: histogram {got.get(cls)}, program {counts}")
        check("class histogram (live objects, exact" in r.stderr, r.stderr[-2000:])
        check(re.search(r"^\[gc\] heap walk \(from the roots\)", r.stderr, re.M),
              "the histogram's walk is logged as a pause")
    r = vm([agent("heapprof", "histo=2,file="), prog], seed=1)
    check(r.returncode == 0, r.stderr[-2000:])
    check(len(row.findall(r.stderr)) == 2, r.stderr[-2000:])
    check_bad(lambda a: [C.minivm, a, prog], "heapprof", "histo=x")


# ---- heapprof: retention labels (retained=N) -----------------------------------------------

@test
def vm_heapprof_retained_labels():
    """retained=3: the final profile's live samples of the top sites carry
    the labels root and retained_by, which the real `go tool pprof` reads:
    -tags lists them, and -tagfocus=root=global cache selects exactly the
    in-use space retained through leaky_cache.mv's global cache (all of the
    labelled space: nothing else holds those sites' objects)."""
    need_vm()
    need_go()
    prog = os.path.join(ROOT, "examples", "programs", "leaky_cache.mv")
    out = fresh("retained.pb.gz")
    # A time budget no build reaches (a sanitizer build walks several times
    # slower): timing must not decide which samples get labels.
    r = vm([agent("heapprof", f"retained=3,interval=16k,path_seconds=3600,file={out}"), prog,
            "60000"], seed=1)
    check(r.returncode == 0, r.stderr[-2000:])
    m = re.search(r"^heapprof: retention labels \(root, retained_by\) on (\d+) of (\d+) live "
                  r"samples of the top (\d+) sites; paths to GC roots: [\d,]+ objects visited in a "
                  r"pause of [\d.]+ ms$", r.stderr, re.M)
    check(m and int(m.group(1)) > 0 and m.group(1) == m.group(2) and m.group(3) == "3",
          r.stderr[-2000:])
    tags = pprof(["-tags", out])
    check(re.search(r"^ root: Total", tags, re.M) and "global cache" in tags, tags)
    by = re.findall(r"\): (global cache -> Cache\.buckets -> Array\[\] -> .*)$", tags, re.M)
    check(by, f"retained_by values:\n{tags}")

    def total(args):
        top = pprof(["-top", "-sample_index=inuse_space", *args, out])
        m = re.search(r"Showing nodes accounting for ([\d.]+)(k?B|MB|GB), ([\d.]+)% of ([\d.]+)"
                      r"(k?B|MB|GB) total", top)
        check(m, top)
        return float(m.group(3))

    focused = total(["-tagfocus=root=global cache"])
    labelled = total(["-tagfocus=retained_by=global cache"])
    check(0 < focused < 100 and focused == labelled, f"focused {focused}%, labelled {labelled}%")
    ignored = total(["-tagignore=root=global cache"])
    check(abs(ignored - (100 - focused)) < 0.1, f"focus {focused}% + ignore {ignored}%")
    check_bad(lambda a: [C.minivm, a, prog], "heapprof", "retained=x")
