#!/usr/bin/env python3
"""Soak: a profiled VM under a storm of signals and requests, then SIGTERM.

  soak_signals.py --minivm build/bin/minivm --heapprof build/bin/libheapprof.so \
      [--attach build/bin/minivm-attach] [--seconds N] [--runs N] [--work DIR]

Each run starts minivm on forever.mv (two threads allocating for ever) with
heapprof writing a final profile and serving http=0, and for N seconds
(--seconds, else $MINIVM_SOAK_SECONDS, else 30) keeps up, all at once:
  - SIGUSR2 (heapprof dump requests), also on through SIGTERM and VM death;
  - attach requests: the trigger file and SIGQUIT, the next one once the VM
    has taken the trigger (a SIGQUIT without one would end the VM, 131), and
    with --attach a `minivm-attach PID heap` now and then;
  - `GET /debug/pprof/heap?gc=1`, one after another, each a 200 profile.
Then SIGTERM. The run passes if minivm was alive and answering throughout,
exits 143, ends within the bound docs/language.md gives (5 s past the
signal or the end of heapprof's VMDeath, which its `heapprof: wrote` line
marks; 2 s of slack for this poll-based observation, the soak's only
timing check), and its final profile is complete: our decoder and, where
installed, `go tool pprof -top` read it. The last line of output is
`N passed, M failed` (one per run).
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (  # noqa: E402 (the shared runner set-up and helpers)
    C, add_path_options, check, find_go, fresh, no_sanitizer_report, take_paths,
    use_tsan_suppressions, work_dir)
from profiles import check_heap_profile, pprof, read_profile  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FOREVER = os.path.join(HERE, "forever.mv")
END_BOUND = 5  # seconds: kEndBoundSeconds, vm/runtime/signal_dispatcher.h
SLACK = 2
HANG = 300  # only catches hangs


def default_signals():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGPIPE, signal.SIGUSR2):
        signal.signal(s, signal.SIG_DFL)


def describe(code):
    if code is None:
        return "running"
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited {code}"


class Soak:
    def __init__(self, run, seconds):
        self.dir = fresh(f"soak{run}")
        os.makedirs(self.dir)
        self.out = os.path.join(self.dir, "h.pb.gz")
        self.err = os.path.join(self.dir, "vm.err")
        with open(os.path.join(self.dir, "vm.out"), "w") as o, open(self.err, "w") as e:
            self.p = subprocess.Popen(
                [C.minivm, f"--seed={run + 1}", "--young=4m",
                 f"-agentpath:{C.heapprof}=file={self.out},http=0,top=0", FOREVER, "2"],
                stdin=subprocess.DEVNULL, stdout=o, stderr=e, cwd=self.dir,
                preexec_fn=default_signals)
        self.seconds = seconds
        self.lock = threading.Lock()  # no kill after the process was reaped
        self.reaped = False
        self.stop_quit = threading.Event()
        self.stop_all = threading.Event()
        self.errors = []
        self.counts = {"SIGUSR2": 0, "SIGQUIT": 0, "attach": 0, "http": 0}

    def stderr(self):
        with open(self.err) as f:
            return f.read()

    def kill(self, sig):
        with self.lock:
            if self.reaped:
                return False
            os.kill(self.p.pid, sig)
            return True

    def poll(self):
        with self.lock:
            code = self.p.poll()
            self.reaped = code is not None
            return code

    def fail(self, what):
        self.errors.append(what)
        self.stop_quit.set()
        self.stop_all.set()

    def wait_port(self):
        deadline = time.time() + HANG
        while time.time() < deadline:
            m = re.search(r"heapprof: serving http://127\.0\.0\.1:(\d+)/", self.stderr())
            if m:
                return int(m.group(1))
            check(self.poll() is None, f"minivm ended at start:\n{self.stderr()[-2000:]}")
            time.sleep(0.02)
        raise AssertionError("heapprof never served")

    # -- the storm's threads

    def sigusr2(self):
        while not self.stop_all.is_set():
            if not self.kill(signal.SIGUSR2):
                return
            self.counts["SIGUSR2"] += 1
            time.sleep(0.005)

    def sigquit(self):
        folder = f"/tmp/minivm-attach-{os.geteuid()}"
        os.makedirs(folder, mode=0o700, exist_ok=True)
        trigger = os.path.join(folder, f"{self.p.pid}.trigger")
        n = 0
        while not self.stop_quit.is_set():
            # As minivm-attach does: only the maker of the trigger signals,
            # so that no SIGQUIT finds its trigger already used (it would
            # end the VM).
            try:
                os.close(os.open(trigger, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                time.sleep(0.005)
                continue
            self.kill(signal.SIGQUIT)
            self.counts["SIGQUIT"] += 1
            deadline = time.time() + 60
            while os.path.exists(trigger) and time.time() < deadline:
                if self.poll() is not None:
                    return self.fail(f"minivm ended during the storm: {self.p.returncode}")
                time.sleep(0.002)
            if os.path.exists(trigger):
                return self.fail("the VM never took an attach trigger")
            n += 1
            if C.attach and n % 20 == 0:
                r = subprocess.run([C.attach, str(self.p.pid), "heap"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, timeout=HANG)
                if r.returncode != 0:
                    sock = os.path.join(folder, f"{self.p.pid}.sock")
                    return self.fail(f"minivm-attach heap: {r.returncode} {r.stderr.strip()} "
                                     f"(socket {'there' if os.path.exists(sock) else 'gone'}, "
                                     f"minivm {describe(self.poll())})")
                self.counts["attach"] += 1
            time.sleep(0.005)

    def http(self, port):
        while not self.stop_quit.is_set():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/pprof/heap?gc=1",
                                            timeout=HANG) as r:
                    body = r.read()
                    if r.status != 200 or body[:2] != b"\x1f\x8b":
                        return self.fail(f"?gc=1: {r.status} {body[:100]!r}")
            except (urllib.error.URLError, OSError) as e:
                return self.fail(f"?gc=1: {e} (minivm {describe(self.poll())})")
            self.counts["http"] += 1

    def run(self):
        port = self.wait_port()
        threads = [threading.Thread(target=self.sigusr2), threading.Thread(target=self.sigquit),
                   threading.Thread(target=self.http, args=(port,))]
        for t in threads:
            t.start()
        self.stop_quit.wait(self.seconds)
        self.stop_quit.set()
        for t in threads[1:]:
            t.join()
        try:
            if self.errors:
                # How it ended says more (131: a SIGQUIT that found no
                # trigger); a VM still running after that is killed.
                self.stop_all.set()
                threads[0].join()
                try:
                    self.p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                raise AssertionError("; ".join(self.errors) +
                                     f" (then minivm {describe(self.poll())})\n"
                                     f"{self.stderr()[-2000:]}")
            check(self.poll() is None, f"minivm ended during the storm: {self.p.returncode}")
            # SIGUSR2 goes on through the end (threads[0]).
            sent = time.time()
            self.kill(signal.SIGTERM)
            wrote_at = None
            wrote = f"heapprof: wrote {self.out}"
            while self.poll() is None:
                if wrote_at is None and wrote in self.stderr():
                    wrote_at = time.time()
                check(time.time() - sent < HANG, "minivm never ended after SIGTERM")
                time.sleep(0.02)
            ended = time.time()
        finally:
            self.stop_all.set()
            threads[0].join()
            if self.poll() is None:
                self.p.kill()
                self.poll()
        err = self.stderr()
        code = self.p.returncode
        no_sanitizer_report(err, "soak")
        check(code == 143, f"exit {code}, want 143\n{err[-2000:]}")
        check(wrote in err, f"no final profile written:\n{err[-2000:]}")
        since = max(sent, wrote_at or sent)
        check(ended - since <= END_BOUND + SLACK,
              f"ended {ended - since:.1f} s after the signal or VMDeath, bound {END_BOUND} s")
        prof = read_profile(self.out)
        check_heap_profile(prof)
        check(prof["samples"], "the final profile has no samples")
        if C.go:
            top = pprof(["-top", "-sample_index=alloc_space", self.out])
            check("allocate_forever" in top, top)
        dumps = sorted(f for f in os.listdir(self.dir) if re.fullmatch(r"h\.\d{4}\.pb\.gz", f))
        check(dumps, "no SIGUSR2 dump was written")
        for d in dumps[-2:]:
            check_heap_profile(read_profile(os.path.join(self.dir, d)))
        return (f"exit 143 in {ended - sent:.1f} s, {self.counts['SIGUSR2']} SIGUSR2, "
                f"{self.counts['SIGQUIT']} SIGQUIT, {self.counts['attach']} attach, "
                f"{self.counts['http']} ?gc=1, {len(dumps)} dumps")


def main():
    ap = argparse.ArgumentParser()
    add_path_options(ap, "minivm", "heapprof")
    ap.add_argument("--attach", help="minivm-attach, for `heap` requests in the storm")
    ap.add_argument("--seconds", type=float,
                    default=float(os.environ.get("MINIVM_SOAK_SECONDS", "30")))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--work")
    a = ap.parse_args()
    take_paths(C, a, "minivm", "heapprof", "attach")
    C.work = work_dir(a.work, "soak_signals_")
    C.go = find_go()
    use_tsan_suppressions()
    default_signals()
    print(f"soak: {a.runs} run(s) of {a.seconds:g} s; work dir {C.work}; "
          f"go: {C.go or 'not installed'}", flush=True)
    passed = failed = 0
    for run in range(a.runs):
        soak = Soak(run, a.seconds)
        try:
            print(f"PASS run {run + 1}: {soak.run()}", flush=True)
            passed += 1
            shutil.rmtree(soak.dir, ignore_errors=True)
        except AssertionError as e:
            print(f"FAIL run {run + 1}: {e}", flush=True)
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
