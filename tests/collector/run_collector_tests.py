#!/usr/bin/env python3
"""End-to-end tests of minivm-collector and the remote agent: stdlib only.

A real collector process serves real VMs (several at once; killed with
SIGKILL mid-run; a stalled collector so that a tiny buffer overflows) and
hand-made clients written here (torn records, malformed records, bad
hellos), and is itself killed and stopped under running VMs. Profiles are
decoded here (tests/tools' protobuf decoder) and read with `go tool pprof`
(skipped with a message if go is missing).

Exactness: a VM can load heapprof beside the remote agent; both receive the
same sampled allocations and frees, so unless records were dropped the two
profiles must be equal row by row (values, stacks, labels), at any
interval. Truth checks: interval 0 counts every allocation of
tests/collector/known.mv; threads.mv's estimates are within 5.7 standard
deviations (Horvitz-Thompson variance) of the truth, seeds printed.

Waiting for a process event is bounded polling with a generous limit
(--timeout, wider in sanitizer builds); no test depends on how long
anything takes.

  run_collector_tests.py --minivm build/bin/minivm \
      --collector build/bin/minivm-collector --remote build/bin/libremote.so \
      --heapprof build/bin/libheapprof.so [--work DIR] [--timeout S] [-k NAME]

The last line of output is `N passed, M failed`.
"""
import argparse
import fcntl
import glob
import math
import mmap
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
from harness import (  # noqa: E402 (the shared test runner)
    Ctx, Skip, add_path_options, check, find_go, read_shared, run_tests, take_paths, test_registry)
from profiles import Z, _fields, decode_profile  # noqa: E402 (the shared decoder)

# protocol.h and ring_buffer.h, for the hand-made clients.
MAGIC, VERSION, PAGE = 0x4352564D, 1, 4096
META_WRITE_POS, META_SHUTTING_DOWN = 64, 196
COMMIT = 1 << 63
K_ALLOC, K_FREE, K_PROMOTE, K_METHOD, K_LINE, K_CLASS, K_THREAD = range(1, 8)


TESTS, test = test_registry()
C = Ctx()


def wait_for(pred, what, limit=None):
    """Polls pred() until true; fails after the limit (generous: a bound, not a timing)."""
    deadline = time.monotonic() + (limit or C.limit)
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {limit or C.limit} s")
        time.sleep(0.05)


def fresh(name):
    p = os.path.join(C.work, name)
    shutil.rmtree(p, ignore_errors=True)
    os.makedirs(p)
    return p


# ---- processes ------------------------------------------------------------------

class Collector:
    def __init__(self, name, *extra):
        self.dir = fresh(name)
        self.sock = os.path.join(self.dir, "c.sock")
        self.out = os.path.join(self.dir, "out")
        self.log_path = os.path.join(self.dir, "collector.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [C.collector, f"--socket={self.sock}", f"--out={self.out}", *extra],
                stdout=subprocess.DEVNULL, stderr=log)
        wait_for(lambda: "listening on" in self.log() or self.proc.poll() is not None,
                 "the collector to listen")
        check(self.proc.poll() is None, f"collector exited:\n{self.log()}")

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def finals(self, pid):
        return glob.glob(os.path.join(self.out, f"heap.{pid}.*.final.pb.gz"))

    def wait_final(self, pid):
        return wait_for(lambda: self.finals(pid), f"the final profile of pid {pid}")[0]

    def dumps(self, pid):
        return sorted(p for p in glob.glob(os.path.join(self.out, f"heap.{pid}.*.pb.gz"))
                      if not p.endswith(".final.pb.gz"))

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=C.limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"collector did not stop on {sig}:\n{self.log()}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class VM:
    """minivm with the remote agent (and optionally heapprof), output to files."""

    def __init__(self, coll, name, prog, args=(), remote="", heapprof=None, seed=1, sock=None):
        self.dir = os.path.join(coll.dir if coll else C.work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.heap = os.path.join(self.dir, "heapprof.pb.gz")
        opts = f"socket={sock or coll.sock}" + (f",{remote}" if remote else "")
        cmd = [C.minivm, f"--seed={seed}", f"-agentpath:{C.remote}={opts}"]
        if heapprof is not None:
            hp = f"file={self.heap}" + ("" if "top=" in heapprof else ",top=0")
            cmd.append(f"-agentpath:{C.heapprof}={hp}" + (f",{heapprof}" if heapprof else ""))
        cmd += [prog, *map(str, args)]
        self.cmd = cmd
        self.out = open(os.path.join(self.dir, "stdout"), "w+")
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=self.err, cwd=self.dir)
        self.pid = self.proc.pid

    def wait(self):
        try:
            rc = self.proc.wait(timeout=C.limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"VM did not finish: {' '.join(self.cmd)}")
        return rc

    # pread, not seek and read: the VM writes through the same open file
    # descriptions (Popen dups them), so a seek while it runs would move
    # where its next write lands, over what it wrote before.
    def stdout(self):
        return read_shared(self.out)

    def stderr(self):
        return read_shared(self.err)

    def finish_ok(self):
        rc = self.wait()
        check(rc == 0, f"VM exit {rc}: {' '.join(self.cmd)}\n{self.stderr()}")


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=C.limit, cwd=C.work, **kw)


def tools_prog(name):
    return os.path.join(ROOT, "tests", "tools", name)


KNOWN = os.path.join(HERE, "known.mv")


# ---- profiles -------------------------------------------------------------------

def read(path):
    with open(path, "rb") as f:
        data = f.read()
    prof = decode_profile(data)
    import gzip
    raw = gzip.decompress(data)
    strings, comment_ids = [], []
    for f, _, v in _fields(raw):
        if f == 6:
            strings.append(v.decode())
        elif f == 13:
            comment_ids.append(v)
    prof["comments"] = [strings[i] for i in comment_ids]
    return prof


def comment(prof, prefix):
    for c in prof["comments"]:
        if c.startswith(prefix):
            return c
    raise AssertionError(f"no comment starting {prefix!r} in {prof['comments']}")


def counts(prof):
    """(samples received, records dropped, samples lost) from the comments."""
    import re
    rec = comment(prof, "records received:")
    drop = comment(prof, "records dropped by the VM")
    samples = int(re.search(r"samples (\d+)", rec).group(1))
    m = re.search(r"\): (\d+) \(samples lost: (\d+)\)", drop)
    return samples, int(m.group(1)), int(m.group(2))


def rows(prof):
    """{(stack of (fn, file, line), class, thread): [4 values]}; stacks leaf first."""
    out = {}
    for s in prof["samples"]:
        stack = tuple(fr for l in s["locs"] for fr in prof["locations"][l])
        key = (stack, s["labels"].get("class"), s["labels"].get("thread"))
        acc = out.setdefault(key, [0, 0, 0, 0])
        for i, v in enumerate(s["values"]):
            acc[i] += v
    return out


def same_profile(remote_path, heapprof_path):
    a, b = rows(read(remote_path)), rows(read(heapprof_path))
    missing = set(b) ^ set(a)
    check(not missing, f"rows in one profile only: {sorted(missing)[:5]}")
    diff = [(k, a[k], b[k]) for k in a if a[k] != b[k]]
    check(not diff, f"{len(diff)} rows differ (remote, heapprof): {diff[:3]}")
    return a


def by_leaf_class(r, function, klass):
    tot = [0, 0, 0, 0]
    for (stack, k, _), v in r.items():
        if stack and stack[0][0] == function and k == klass:
            tot = [x + y for x, y in zip(tot, v)]
    return tot


def need_go():
    if not C.go:
        raise Skip("go not installed (apt-get install golang-go): `go tool pprof` checks skipped")


def pprof(*args):
    env = dict(os.environ, HOME=C.work, PPROF_TMPDIR=C.work)
    r = subprocess.run([C.go, "tool", "pprof", *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=C.limit, env=env, cwd=C.work)
    check(r.returncode == 0, f"go tool pprof {' '.join(args)} failed:\n{r.stderr}")
    return r.stdout


def remote_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("remote:")]


# ---- hand-made clients (the protocol of protocol.h, written out in Python) -------

class FakeClient:
    def __init__(self, coll, ring_bytes=4096, interval=4096, hello=None):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(C.limit)
        self.s.connect(coll.sock)
        self.s.send(hello if hello is not None else
                    struct.pack("<IIIIqQ", MAGIC, VERSION, os.getpid(), 0, interval, ring_bytes))
        msg, fds, _, _ = socket.recv_fds(self.s, 512, 4)
        self.magic, _, self.status, self.conn, self.ring = struct.unpack_from("<IIIIQ", msg)
        self.reason = msg[24:].split(b"\0")[0].decode()
        self.mm = mmap.mmap(fds[0], PAGE + self.ring) if fds else None
        for fd in fds:
            os.close(fd)
        self.pos = 0

    def put(self, rtype, payload, commit=True, size=None):
        """Writes a record at the write position (not published until publish())."""
        size = size if size is not None else (8 + len(payload) + 7) & ~7
        off = PAGE + (self.pos & (self.ring - 1))
        self.mm[off + 8:off + 8 + len(payload)] = payload
        self.mm[off:off + 8] = struct.pack("<Q", size | rtype << 32 | (COMMIT if commit else 0))
        self.pos += (size + 7) & ~7

    def publish(self, pos=None):
        self.mm[META_WRITE_POS:META_WRITE_POS + 8] = struct.pack("<Q", self.pos if pos is None
                                                                 else pos)

    def put_names(self):
        self.put(K_CLASS, struct.pack("<QII", 0x100, 4, 0) + b"Node")
        self.put(K_THREAD, struct.pack("<II", 1, 4) + b"main")
        self.put(K_METHOD, struct.pack("<QII", 0x200, 4, 7) + b"make" + b"fake.mv")
        self.put(K_LINE, struct.pack("<QqiI", 0x200, 3, 17, 0))

    def alloc(self, tag=1, frames=((0x200, 3),), frame_count=None, commit=True):
        body = struct.pack("<QQdQII", tag, 32, 4096.0, 0x100, 1,
                           len(frames) if frame_count is None else frame_count)
        body += b"".join(struct.pack("<Qq", m, l) for m, l in frames)
        self.put(K_ALLOC, body, commit=commit)

    def wait_closed(self):
        """Waits for the collector to close the connection (end of file)."""
        self.s.settimeout(C.limit)
        while self.s.recv(16):
            pass

    def close(self, end=False):
        if end:
            self.s.send(b"E")
        self.s.close()

    def final(self, coll):
        return wait_for(lambda: os.path.exists(p := os.path.join(
            coll.out, f"heap.{os.getpid()}.{self.conn}.final.pb.gz")) and p,
            f"final profile of fake connection {self.conn}")


# ---- tests ------------------------------------------------------------------------

@test
def collector_bad_arguments():
    d = fresh("badargs")
    sock, out = os.path.join(d, "s"), os.path.join(d, "o")
    cases = [
        ([], "--socket and --out are required"),
        ([f"--socket={sock}"], "--socket and --out are required"),
        ([f"--socket={sock}", f"--out={out}", "--period=x"], "bad argument '--period=x'"),
        ([f"--socket={sock}", f"--out={out}", "--period=0"], "bad argument '--period=0'"),
        ([f"--socket={sock}", f"--out={out}", "--buffer=1000"], "bad argument '--buffer=1000'"),
        ([f"--socket={sock}", f"--out={out}", "--max-clients=0"], "bad argument"),
        ([f"--socket={sock}", f"--out={out}", "--frobnicate=1"], "unknown option"),
        ([f"--socket={sock}", f"--out={out}", "stray"], "want --name=value"),
        ([f"--socket={'x' * 200}", f"--out={out}"], "socket path must have"),
        ([f"--socket={sock}", f"--out={os.path.join(KNOWN)}"], "is not a directory"),
        ([f"--socket={KNOWN}", f"--out={out}"], "exists and is not a socket"),
    ]
    for args, want in cases:
        r = run([C.collector, *args])
        check(r.returncode != 0, f"{args}: exit 0")
        lines = r.stderr.splitlines()
        check(len(lines) == 1 and want in lines[0] and lines[0].startswith("minivm-collector: "),
              f"{args}: want one line with {want!r}, got {r.stderr!r}")
    with Collector("badargs_live") as c:
        r = run([C.collector, f"--socket={c.sock}", f"--out={c.out}"])
        check(r.returncode == 1 and "another collector is listening" in r.stderr, r.stderr)
        check(c.stop() == 0, "collector exit status")
    check(not os.path.exists(c.sock), "socket file left behind")


@test
def agent_bad_options():
    d = fresh("agent_badopts")
    hello = os.path.join(ROOT, "examples", "programs", "hello.mv")
    cases = [
        ("", "remote: missing option socket=PATH"),
        (f"socket={d}/none.sock", "remote: cannot connect to the collector at"),
        (f"socket={d}/s,buffer=5000", "remote: bad option 'buffer=5000'"),
        (f"socket={d}/s,depth=0", "remote: bad option 'depth=0'"),
        (f"socket={d}/s,interval=-1", "remote: bad option 'interval=-1'"),
        (f"socket={d}/s,bogus=1", "remote: bad option 'bogus=1'"),
        (f"socket={'y' * 200}", "remote: bad option 'socket="),
        # The tool agents' one option parser (docs/tools.md): the same words.
        (f"socket={d}/s,depth=2,depth=3", "remote: bad option 'depth=3': depth is given twice"),
        ("socket=", "remote: bad option 'socket': missing value (want the collector's socket"),
        (f"socket={d}/s,,gc=1", "remote: bad option '': want key=value options separated by"),
    ]
    for opts, want in cases:
        r = run([C.minivm, f"-agentpath:{C.remote}" + (f"={opts}" if opts else ""), hello])
        check(r.returncode == 1, f"{opts}: exit {r.returncode}")
        lines = remote_lines(r.stderr)
        check(len(lines) == 1 and lines[0].startswith(want), f"{opts}: {r.stderr!r}")


@test
def matches_heapprof_exactly_at_interval_0():
    n = 20000
    with Collector("exact0") as c:
        # A buffer that holds every record even if the collector never read:
        # no drop is possible, so the profiles must be equal.
        vm = VM(c, "vm", KNOWN, [n], remote="interval=0,buffer=16m", heapprof="interval=0")
        vm.finish_ok()
        check(vm.stdout().strip() == str(n), vm.stdout())
        final = c.wait_final(vm.pid)
        prof = read(final)
        check(comment(prof, "final profile:") == "final profile: the VM exited", prof["comments"])
        samples, dropped, lost = counts(prof)
        check(dropped == 0 and lost == 0, f"dropped {dropped}, lost {lost}")
        r = same_profile(final, vm.heap)
        pairs = by_leaf_class(r, "pairs", "Pair")
        check(pairs[:2] == [n, 32 * n], f"pairs: {pairs}")
        blobs = by_leaf_class(r, "blobs", "Bytes")
        check(blobs[:2] == [n, 128 * n], f"blobs: {blobs}")
        check(samples >= 2 * n, f"samples {samples}")
        lines = remote_lines(vm.stderr())
        check(len(lines) == 1 and "0 records dropped" in lines[0], vm.stderr())


@test
def several_vms_at_once():
    n, interval, seeds = 100000, 4096, [11, 12, 13]
    print(f"  seeds {seeds}, interval {interval}, 3 threads x {n} Work objects per VM")
    with Collector("several") as c:
        vms = [VM(c, f"vm{s}", tools_prog("threads.mv"), [n], remote=f"interval={interval}",
                  heapprof=f"interval={interval}", seed=s) for s in seeds]
        for vm in vms:
            vm.finish_ok()
        finals = [c.wait_final(vm.pid) for vm in vms]
        check(len(set(finals)) == 3, finals)
        p = 1 - math.exp(-40 / interval)
        truth = 3 * n * 40
        sigma = math.sqrt(3 * n * 40 * 40 * (1 - p) / p)
        for vm, final in zip(vms, finals):
            prof = read(final)
            check(counts(prof)[1] == 0, f"drops: {prof['comments']}")
            r = same_profile(final, vm.heap)
            threads = {k[2] for k in r if k[0] and k[0][0][0] == "work"}
            check(threads == {"main", "thread-1", "thread-2"}, f"threads {threads}")
            est = by_leaf_class(r, "work", "Work")[1]
            check(abs(est - truth) <= Z * sigma,
                  f"seed {vm.cmd[1]}: Work bytes {est}, truth {truth}, sigma {sigma:.0f}")
        log = c.log()
        check(log.count("connection ") >= 3 and all(f"from pid {vm.pid}" in log for vm in vms),
              log)


@test
def thread_filter_with_descendants():
    # threads=thread-1+ (statmemprof's rule): thread-1 and the threads it
    # spawns, directly or not, and nothing else; the same rows as heapprof
    # with the same filter, and each thread's Blob bytes within Z sigma.
    n, interval, seed = 40000, 4096, 33
    with Collector("descendants") as c:
        vm = VM(c, "vm", tools_prog("descendants.mv"), [n],
                remote=f"interval={interval},threads=thread-1+",
                heapprof=f"interval={interval},threads=thread-1+",
                seed=seed)
        vm.finish_ok()
        final = c.wait_final(vm.pid)
        r = same_profile(final, vm.heap)
        threads = {k[2] for k in r}
        want = {"thread-1", "thread-2", "thread-3", "thread-4"}
        check(threads == want, f"threads {sorted(threads)}, want {sorted(want)}")
        p = 1 - math.exp(-32 / interval)
        sigma = math.sqrt(n * 32 * 32 * (1 - p) / p)
        for t in sorted(want):
            est = sum(v[1] for (stack, k, th), v in r.items() if th == t and k == "Blob")
            check(abs(est - 32 * n) <= Z * sigma,
                  f"seed {seed} {t}: {est} B, truth {32 * n}, sigma {sigma:.0f}")
        print(f"  seed {seed}, interval {interval}, |z| <= {Z}")


@test
def go_pprof_reads_the_profile():
    need_go()
    with Collector("gopprof") as c:
        vm = VM(c, "vm", KNOWN, [5000], remote="interval=0,buffer=4m")
        vm.finish_ok()
        final = c.wait_final(vm.pid)
        comments = pprof("-comments", final)
        check("records dropped by the VM (ring buffer full): 0" in comments, comments)
        check("final profile: the VM exited" in comments, comments)
        top = pprof("-top", "-sample_index=alloc_space", final)
        check("pairs" in top and "blobs" in top, top)
        traces = pprof("-traces", final)
        check("class:  Pair" in traces and "thread:  main" in traces, traces)
        raw = pprof("-raw", final)
        check("known.mv" in raw, raw[:2000])


@test
def vm_killed_mid_run_leaves_a_usable_profile():
    with Collector("kill9vm") as c:
        vm = VM(c, "vm", tools_prog("spin.mv"), [600], remote="interval=4096")
        # Until the collector has some of its samples (SIGUSR1 dumps show them).
        def has_samples():
            c.proc.send_signal(signal.SIGUSR1)
            for d in c.dumps(vm.pid):
                try:
                    if counts(read(d))[0] > 0:
                        return True
                except (OSError, ValueError, AssertionError, EOFError):
                    pass  # a dump being written: look again
            return False
        wait_for(lambda: (time.sleep(0.2) or has_samples()), "samples to reach the collector")
        vm.proc.kill()
        vm.proc.wait()
        final = c.wait_final(vm.pid)
        prof = read(final)
        why = comment(prof, "final profile:")
        check(why.startswith("final profile: the VM died"), why)
        check(counts(prof)[0] > 0 and prof["samples"], "no samples in the final profile")
        check(any(s["locs"] and prof["locations"][s["locs"][0]][0][0] == "churn"
                  for s in prof["samples"]), "no churn frames")
        check(c.proc.poll() is None, "collector died")
        dump = read(c.dumps(vm.pid)[0])
        check("not final" in comment(dump, "dump "), dump["comments"])
        if C.go:
            check("churn" in pprof("-top", final), "pprof -top")


@test
def vm_dying_mid_record_torn_and_unreadable():
    with Collector("torn") as c:
        # Committed records, then one reserved but never committed (the
        # writer died mid-record), then a committed one after it.
        a = FakeClient(c)
        a.put_names()
        a.alloc(tag=1)
        a.alloc(tag=2, commit=False)
        a.alloc(tag=3)
        a.publish()
        a.close()
        prof = read(a.final(c))
        why = comment(prof, "final profile:")
        check("the VM died" in why and "died mid-record: 1 torn records discarded, 0 bytes"
              in why, why)
        check(counts(prof)[0] == 2, prof["comments"])
        check(sum(s["values"][0] for s in prof["samples"]) == 2 * 128, prof["samples"])
        frames = {fr for loc in prof["locations"].values() for fr in loc}
        check(("make", "fake.mv", 17) in frames, frames)
        # A writer that died between reserving and its first header store.
        b = FakeClient(c)
        b.put_names()
        b.alloc(tag=1)
        b.publish(b.pos + 64)
        b.close()
        why = comment(read(b.final(c)), "final profile:")
        check("0 torn records discarded, 64 bytes unreadable" in why, why)
        # A clean exit says so.
        e = FakeClient(c)
        e.put_names()
        e.publish()
        e.close(end=True)
        check(comment(read(e.final(c)), "final profile:") == "final profile: the VM exited", "")


@test
def malformed_records_are_rejected_and_the_collector_lives():
    # (name, corruption, error, samples kept: those before the bad record;
    # a bad write position is seen before any record is read)
    cases = [
        ("unknown type", lambda f: f.put(99, b"\0" * 8), "unknown record type 99", 1),
        ("odd size", lambda f: f.put(K_FREE, b"\0" * 8, size=12), "bad record header", 1),
        ("frame count", lambda f: f.alloc(frames=((0x200, 3),), frame_count=3),
         "alloc record of 56 bytes, want 88", 1),
        ("name length", lambda f: f.put(K_CLASS, struct.pack("<QII", 1, 9999, 0) + b"x"),
         "name longer than 4096 bytes", 1),
        ("write_pos", lambda f: setattr(f, "pos", f.pos + (1 << 40)), "write position", 0),
    ]
    with Collector("malformed") as c:
        for name, bad, want, kept in cases:
            f = FakeClient(c)
            f.put_names()
            f.alloc(tag=1)
            bad(f)
            f.publish()
            f.wait_closed()  # the collector ends the connection
            shut = struct.unpack_from("<I", f.mm, META_SHUTTING_DOWN)[0]
            check(shut == 1, f"{name}: shutting_down not set")
            prof = read(f.final(c))
            why = comment(prof, "final profile:")
            check(why.startswith("final profile: connection dropped: ") and want in why,
                  f"{name}: {why}")
            check(counts(prof)[0] == kept, f"{name}: {kept} valid samples kept")
            f.close()
        # Invalid names are sanitised, not rejected.
        f = FakeClient(c)
        f.put(K_METHOD, struct.pack("<QII", 0x200, 3, 2) + b"a\nb" + b"\xff.")
        f.put(K_CLASS, struct.pack("<QII", 0x100, 4, 0) + b"Node")
        f.alloc()
        f.publish()
        f.close(end=True)
        frames = {fr for loc in read(f.final(c))["locations"].values() for fr in loc}
        check(("a?b", "?.", 0) in frames, frames)
        check(c.proc.poll() is None, "collector died")
        vm = VM(c, "vm_after", KNOWN, [100], remote="interval=0")
        vm.finish_ok()
        check(counts(read(c.wait_final(vm.pid)))[0] >= 200, "a real VM after the bad ones")


@test
def bad_hellos_are_refused():
    good = struct.pack("<IIIIqQ", MAGIC, VERSION, 1, 0, 4096, 0)
    cases = [
        (good[:16], "not a minivm remote agent hello (16 bytes)"),
        (struct.pack("<IIIIqQ", 0xdead, VERSION, 1, 0, 4096, 0), "not a minivm remote agent"),
        (struct.pack("<IIIIqQ", MAGIC, 99, 1, 0, 4096, 0), "protocol version 99"),
        (struct.pack("<IIIIqQ", MAGIC, VERSION, 1, 0, -5, 0), "bad sampling interval -5"),
        (struct.pack("<IIIIqQ", MAGIC, VERSION, 1, 0, 4096, 12345), "bad buffer size 12345"),
        (struct.pack("<IIIIqQ", MAGIC, VERSION, 1, 0, 4096, 1 << 40), "bad buffer size"),
    ]
    with Collector("hellos", "--max-clients=2") as c:
        for hello, want in cases:
            f = FakeClient(c, hello=hello)
            check(f.status == 1 and f.mm is None and want in f.reason, f"{want}: {f.reason!r}")
            f.close()
        # A client that hangs up before its hello.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(c.sock)
        s.close()
        a, b = FakeClient(c), FakeClient(c)
        check(a.status == 0 and b.status == 0, "two clients")
        full = FakeClient(c)
        check(full.status == 1 and "too many VMs connected" in full.reason, full.reason)
        vm = VM(c, "vm_refused", KNOWN, [10])
        check(vm.wait() == 1, "refused VM must not run")
        lines = remote_lines(vm.stderr())
        check(len(lines) == 1 and "refused the connection: too many VMs" in lines[0],
              vm.stderr())
        check(c.proc.poll() is None, "collector died")
        wait_for(lambda: c.log().count("refused") >= len(cases) + 2, "refusals logged")


@test
def collector_killed_vm_runs_on():
    with Collector("killcoll") as c:
        vm = VM(c, "vm", tools_prog("spin.mv"), [5], remote="interval=4096")
        wait_for(lambda: f"from pid {vm.pid}" in c.log(), "the VM to connect")
        c.proc.kill()
        check(vm.proc.poll() is None, "the VM ended before the collector was killed")
        c.proc.wait()
        vm.finish_ok()
        check(vm.stdout().startswith("iterations"), vm.stdout())
        lines = remote_lines(vm.stderr())
        check(len(lines) == 1 and "lost the collector" in lines[0] and
              "sampling stopped, the program continues" in lines[0], vm.stderr())
        # The killed collector left its socket file: a new one replaces it.
        check(os.path.exists(c.sock), "no stale socket file")
        with open(os.path.join(c.dir, "second.log"), "w") as log:
            again = subprocess.Popen([C.collector, f"--socket={c.sock}", f"--out={c.out}"],
                                     stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_for(lambda: "listening on" in open(os.path.join(c.dir, "second.log")).read()
                     or again.poll() is not None, "a second collector on the stale socket")
            check(again.poll() is None, open(os.path.join(c.dir, "second.log")).read())
            vm2 = VM(c, "vm2", KNOWN, [10], remote="interval=0")
            vm2.finish_ok()
        finally:
            again.terminate()
            again.wait()


@test
def collector_sigterm_writes_final_profiles():
    with Collector("sigterm") as c:
        vms = [VM(c, f"vm{i}", tools_prog("spin.mv"), [5], remote="interval=65536", seed=i)
               for i in (1, 2)]
        for vm in vms:
            wait_for(lambda: f"from pid {vm.pid}" in c.log(), "the VM to connect")
        check(c.stop(signal.SIGTERM) == 0, f"collector exit status:\n{c.log()}")
        check(not os.path.exists(c.sock), "socket file left behind")
        for vm in vms:
            prof = read(c.finals(vm.pid)[0])
            why = comment(prof, "final profile:")
            check(why.startswith("final profile: the collector stopped (SIGTERM) while the VM "
                                 "was running"), why)
            vm.finish_ok()
            lines = remote_lines(vm.stderr())
            check(len(lines) == 1 and "(it stopped serving this VM)" in lines[0], vm.stderr())


@test
def full_buffer_drops_are_counted_exactly():
    with Collector("full") as c:
        # Tiny buffer, every allocation sampled, and the collector stopped
        # while the VM runs: the buffer must overflow. heapprof in the same VM
        # counts every sample, so received + lost must equal its count.
        vm = VM(c, "vm", tools_prog("spin.mv"), [8], remote="interval=0,buffer=4k",
                heapprof="interval=0,top=1")
        wait_for(lambda: f"from pid {vm.pid}" in c.log(), "the VM to connect")
        c.proc.send_signal(signal.SIGSTOP)
        # spin.mv runs for 8 s from its start; the stop must come before its end.
        check(vm.proc.poll() is None, "the VM ended before the collector was stopped")
        try:
            vm.finish_ok()
        finally:
            c.proc.send_signal(signal.SIGCONT)
        prof = read(c.wait_final(vm.pid))
        received, dropped, lost = counts(prof)
        import re
        m = re.search(r"heapprof: (\d+) samples at interval 0", vm.stderr())
        check(m, vm.stderr())
        total = int(m.group(1))
        print(f"  {total} samples: {received} received, {lost} lost; {dropped} records dropped")
        check(lost > 0 and dropped >= lost, prof["comments"])
        check(received + lost == total, f"received {received} + lost {lost} != {total}")
        line = remote_lines(vm.stderr())
        check(len(line) == 1 and f"; {dropped} records dropped" in line[0], vm.stderr())
        if C.go:
            out = pprof("-comments", c.wait_final(vm.pid))
            check(f"records dropped by the VM (ring buffer full): {dropped} (samples lost: {lost})"
                  in out, out)


@test
def periodic_and_on_request_dumps():
    with Collector("dumps", "--period=0.2") as c:
        vm = VM(c, "vm", tools_prog("spin.mv"), [600], remote="interval=16384")
        why = lambda p: comment(read(p), "dump ")
        def dump_saying(word):
            for p in c.dumps(vm.pid):
                try:
                    if word in why(p):
                        return p
                except (OSError, ValueError, AssertionError, EOFError):
                    pass
            return None
        wait_for(lambda: dump_saying("(periodic), not final"), "a periodic dump")
        def usr1():
            c.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.1)
            return dump_saying("(SIGUSR1), not final")
        wait_for(usr1, "a SIGUSR1 dump")
        names = [os.path.basename(p) for p in c.dumps(vm.pid)]
        check(all(n.startswith(f"heap.{vm.pid}.") for n in names), names)
        # SIGTERM ends the VM in order (docs/tools.md, "Stopping a profiled
        # program"): the agent says goodbye at VM death.
        vm.proc.terminate()
        check(vm.proc.wait() == 143, f"exit code {vm.proc.returncode}")
        why = comment(read(c.wait_final(vm.pid)), "final profile:")
        check(why == "final profile: the VM exited", why)


# ---- a collector that is not one: rings the VM must refuse -----------------------

class FakeCollector:
    """Listens like minivm-collector and welcomes one VM with a hand-made ring:
    the right size and header, with only the seals given."""

    def __init__(self, name, seals, ring=8192):
        self.dir = fresh(name)
        self.sock = os.path.join(self.dir, "c.sock")
        self.ring = ring
        self.seals = seals
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ls.bind(self.sock)
        self.ls.listen(1)
        self.ls.settimeout(C.limit)

    def serve(self):
        """Accepts the VM, answers its hello; returns (connection, memfd)."""
        conn, _ = self.ls.accept()
        conn.settimeout(C.limit)
        conn.recv(64)
        fd = os.memfd_create("fake-ring", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
        os.ftruncate(fd, PAGE + self.ring)
        os.pwrite(fd, struct.pack("<IIQ", MAGIC, VERSION, self.ring), 0)
        if self.seals:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, self.seals)
        welcome = struct.pack("<IIIIQ", MAGIC, VERSION, 0, 1, self.ring) + bytes(112)
        socket.send_fds(conn, [welcome], [fd])
        return conn, fd

    def close(self):
        self.ls.close()


def hung_up(conn):
    conn.setblocking(False)
    try:
        return conn.recv(16, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    finally:
        conn.setblocking(True)


@test
def unsealed_ring_is_refused_not_a_crash():
    # A "collector" that keeps the right to resize its memfd and then shrinks
    # it to nothing: had the VM mapped it, its next record would be SIGBUS
    # (exit 135). It must refuse the ring at the handshake instead, like any
    # failed handshake: one remote: line, exit 1, the program never runs.
    # Sealed against resizing but not against more seals (no F_SEAL_SEAL) is
    # refused too: the contract is all three.
    for seals in (0, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW):
        fake = FakeCollector(f"unsealed{seals}", seals)
        try:
            # spin.mv allocates for 20 s: still writing when the file shrinks
            # (only if the ring was wrongly accepted; refused, it never runs).
            vm = VM(None, f"vm_unsealed{seals}", tools_prog("spin.mv"), [20],
                    remote="interval=4096", sock=fake.sock)
            conn, fd = fake.serve()
            mm = mmap.mmap(fd, PAGE + fake.ring)
            # Either the VM refuses (hangs up) or it maps the ring and writes
            # records; only then is the file shrunk under its mapping.
            wait_for(lambda: hung_up(conn) or
                     struct.unpack_from("<Q", mm, META_WRITE_POS)[0] > 0,
                     "the VM to refuse the ring or to write into it")
            mm.close()
            if not seals & fcntl.F_SEAL_SHRINK:
                os.ftruncate(fd, 0)
            rc = vm.wait()
            os.close(fd)
            conn.close()
            check(rc == 1, f"seals {seals}: VM exit {rc} (135 or -7 is SIGBUS)\n{vm.stderr()}")
            lines = remote_lines(vm.stderr())
            check(len(lines) == 1 and "bad shared memory from the collector" in lines[0] and
                  "not sealed against resizing" in lines[0], vm.stderr())
            check(vm.stdout() == "", f"the program ran: {vm.stdout()!r}")
        finally:
            fake.close()
    # The same fake with all three seals is accepted: the check is the seals.
    fake = FakeCollector("sealed", fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    try:
        vm = VM(None, "vm_sealed", KNOWN, [10], remote="interval=0", sock=fake.sock)
        conn, fd = fake.serve()
        vm.finish_ok()
        check(remote_lines(vm.stderr()) and "sent" in remote_lines(vm.stderr())[-1],
              vm.stderr())
        os.close(fd)
        conn.close()
    finally:
        fake.close()


def main():
    ap = argparse.ArgumentParser()
    add_path_options(ap, "minivm", "collector", "remote", "heapprof")
    ap.add_argument("--work")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds any one wait may take (a bound, not a timing)")
    ap.add_argument("-k", action="append", help="only tests whose name contains this")
    a = ap.parse_args()
    take_paths(C, a, "minivm", "collector", "remote", "heapprof")
    C.limit = max(120.0, a.timeout)
    # Socket paths must stay under 108 bytes: a short private directory.
    C.work = os.path.abspath(a.work) if a.work else tempfile.mkdtemp(prefix="coll_")
    if len(C.work) > 60:
        C.work = tempfile.mkdtemp(prefix="coll_")
    os.makedirs(C.work, exist_ok=True)
    C.go = find_go()
    print(f"collector tests: work dir {C.work}; go: {C.go or 'not installed'}")
    return run_tests(TESTS, a.k)


if __name__ == "__main__":
    sys.exit(main())
