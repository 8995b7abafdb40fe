"""heapprof's live endpoint: Go's net/http/pprof forms and HTTP behaviour
(examples/agents/heapprof/pprof_http.h, http_server.h), under fake_vm and
minivm."""

import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request

from harness import C, HERE, Running, Skip, check, fresh, run, test_registry
from profiles import by_leaf, check_heap_profile, decode_profile, need_go, pprof, read_profile
from tool_helpers import agent, check_bad, fake, need_vm, parse_legacy, read_reply, vm

TESTS, test = test_registry()


def raw_http(port, data, timeout=20):
    """Sends `data` on a fresh connection and reads until the server closes it.
    Returns (status, {header-name-lowercase: value}, body); status 0 if the
    server closed without answering."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        if data:
            s.sendall(data)
        return read_reply(s)


def http_get(port, target, method="GET", headers=""):
    return raw_http(port, f"{method} {target} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())


def idle_fake(interval):
    """A fake VM that ran (a tenth of) the leak workload and now allocates
    nothing for a minute (the test kills it); returns it and the truth it
    printed: {leaf: [live bytes now, live bytes after one more collection]}."""
    r = Running([C.fake_vm, "--workload=leak", "--rounds=2000", "--young=400000", "--idle=60",
                 agent("heapprof", f"interval={interval},http=0,file=,top=0")])
    r.wait_port()
    m = r.wait_for(r"fake_vm: idle (\{.*\})\n")
    return r, json.loads(m.group(1))


def kill(run_):
    run_.p.kill()
    run_.p.wait()


@test
def fake_http_gc_runs_a_collection():
    # At interval 0 every allocation is a sample of weight = size, so the
    # in-use bytes are exact: before ?gc=1, those alive at the last
    # collection; after it, those the collection kept.
    r, truth = idle_fake(0)
    try:
        def inuse(target):
            st, _, body = r.fetch(target)
            check(st == 200, f"{target}: {st}")
            return {k: v[1] for k, v in parse_legacy(body.decode()).items() if v[1]}
        now = {k: v[0] for k, v in truth.items() if v[0]}
        after = {k: v[1] for k, v in truth.items() if v[1]}
        check(now != after, f"the workload leaves nothing for a collection to free: {truth}")
        check(inuse("/debug/pprof/heap?debug=1") == now, f"before gc=1: {truth}")
        check(inuse("/debug/pprof/heap?gc=1&debug=1") == after, f"gc=1: {truth}")
        # Without gc=1: the state as of the last collection, the forced one.
        check(inuse("/debug/pprof/heap?debug=1") == after, "after gc=1")
        st, _, body = r.fetch("/debug/pprof/heap")
        check({k: v for k, v in by_leaf(decode_profile(body), 3).items() if v} == after,
              "the protobuf agrees")
        check(inuse("/debug/pprof/allocs?debug=1") == after, "allocs")
    finally:
        kill(r)


@test
def fake_http_protocol():
    r, _ = idle_fake("64k")
    port = r.port
    try:
        # HEAD: GET's status and headers (Content-Length included), no body.
        for target in ("/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/allocs?debug=1",
                       "/debug/pprof/symbol?0x100018", "/debug/pprof/nope",
                       "/debug/pprof/heap?gc=2", "/debug/pprof"):
            g, h = http_get(port, target), http_get(port, target, "HEAD")
            check(g[0] == h[0] and g[1] == h[1] and h[2] == b"", f"HEAD {target}: {h} vs {g[:2]}")
            check(g[1].get("content-length") == str(len(g[2])), f"GET {target}: {g}")
        # The protobuf carries its time, so only the header names must agree.
        g, h = http_get(port, "/debug/pprof/heap"), http_get(port, "/debug/pprof/heap", "HEAD")
        check(g[0] == h[0] == 200 and sorted(g[1]) == sorted(h[1]) and h[2] == b"" and
              g[1]["content-type"] == "application/octet-stream" and
              g[1]["content-disposition"] == 'attachment; filename="heap"', f"{h} vs {g[:2]}")
        st, hdr, _ = http_get(port, "/debug/pprof")
        check(st == 301 and hdr["location"] == "/debug/pprof/", f"{st} {hdr}")
        check(http_get(port, "/debug/pprof/nope")[0] == 404, "unknown profile")
        check(http_get(port, "/index.html")[0] == 404, "unknown path")
        for method in ("POST", "PUT", "DELETE", "OPTIONS", "PATCH"):
            st, hdr, _ = http_get(port, "/debug/pprof/heap", method, "Content-Length: 0\r\n")
            check(st == 405 and hdr.get("allow") == "GET, HEAD", f"{method}: {st} {hdr}")
        for q, msg in (("seconds=abc", '"seconds" - must be a positive integer'),
                       ("seconds=0", '"seconds" - must be a positive integer'),
                       ("gc=2", '"gc" - must be 0 or 1'), ("debug=7", '"debug" - must be 0 or 1'),
                       ("seconds=3600", "exceeds server's WriteTimeout"),
                       ("seconds=1&debug=1", "seconds and debug params are incompatible")):
            st, hdr, body = http_get(port, f"/debug/pprof/heap?{q}")
            check(st == 400 and msg in body.decode() and hdr.get("x-go-pprof") == "1",
                  f"{q}: {st} {body!r}")
        st, _, body = http_get(port, "/debug/pprof/heap?debug=1&color=blue&gc=0")
        check(st == 200 and body.startswith(b"heap profile:"), "unknown parameters are ignored")
        # Limits: a request line over 8 KiB, a header line over 8 KiB, headers
        # over 64 KiB in all.
        st, _, body = http_get(port, "/debug/pprof/heap?x=" + "a" * 9000)
        check(st == 414, f"long URI: {st} {body!r}")
        st, _, body = http_get(port, "/debug/pprof/heap", headers="Cookie: " + "c" * 9000 + "\r\n")
        check(st == 431 and b"8192" in body, f"long header: {st} {body!r}")
        many = "".join(f"X-H{i}: {'v' * 1000}\r\n" for i in range(70))
        st, _, body = http_get(port, "/debug/pprof/heap", headers=many)
        check(st == 431 and b"65536" in body, f"70 KiB of headers: {st} {body!r}")
        # Garbage.
        for junk in (b"\x00\xff\xfe\x80 junk\r\n\r\n", b"GET\r\n\r\n", b"\r\n\r\n",
                     b"GET /debug/pprof/heap HTTP/9.9\r\n\r\n", b"BREW /pot HTTP/1.1\r\n\r\n"):
            st, _, _ = raw_http(port, junk)
            check(st in (400, 404, 405), f"{junk!r}: {st}")
        st, _, _ = raw_http(port, bytes(b for b in range(256) if b != 10) * 40)  # no line end
        check(st == 414, f"binary junk: {st}")
        for _ in range(3):  # connect and reset at once, or mid-request
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /debug/pprof/heap HTT")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        # Symbols for the legacy text's addresses, as pprof asks for them.
        st, _, body = raw_http(port, b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: x\r\n"
                                     b"Content-Length: 17\r\n\r\n0x100017+0x10001f")
        check(st == 200 and body.startswith(b"num_symbols: 1\n0x100017 "), f"symbol: {body!r}")
        # Still serving after all that.
        check(http_get(port, "/debug/pprof/heap")[0] == 200, "still serving")
    finally:
        kill(r)
    check("heapprof" not in r.stderr().replace("heapprof: serving", ""), r.stderr())


@test
def fake_http_slow_clients():
    r, _ = idle_fake("64k")
    port = r.port
    request = b"GET /debug/pprof/heap HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 30 + b"\r\n\r\n"
    state = {"sent": 0, "cut": None}

    def slow():  # one byte a second; stops when the server drops it
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            for i in range(len(request)):
                try:
                    s.sendall(request[i:i + 1])
                except OSError:
                    state["cut"] = i
                    return
                state["sent"] = i + 1
                ready, _, _ = select.select([s], [], [], 1.0)
                if ready:
                    try:
                        data = s.recv(4096)
                    except OSError:
                        data = b""
                    if not data:
                        state["cut"] = i + 1
                        return
    try:
        t = threading.Thread(target=slow)
        t.start()
        quiet = socket.create_connection(("127.0.0.1", port), timeout=60)  # sends nothing
        while state["sent"] < 2 and t.is_alive():
            time.sleep(0.05)
        # Others are served while the slow client is in the middle of its
        # headers, one after the other and many at once.
        for _ in range(5):
            check(http_get(port, "/debug/pprof/heap?debug=1")[0] == 200, "fast client")
        results = []

        def fast(i):
            results.append(http_get(port, "/debug/pprof/heap" + ("?debug=1" if i % 2 else ""))[0])
        many = [threading.Thread(target=fast, args=(i,)) for i in range(32)]
        for th in many:
            th.start()
        for th in many:
            th.join()
        check(results == [200] * 32, f"concurrent clients: {results}")
        sent_meanwhile = state["sent"]
        check(sent_meanwhile < len(request), "the slow client had finished its headers")
        # The server drops both at the read deadline, long before the slow
        # client could finish.
        t.join(timeout=60)
        check(state["cut"] is not None and state["cut"] < len(request),
              f"slow client not cut: {state}")
        quiet.settimeout(30)
        check(quiet.recv(1) == b"", "silent client not dropped")
        quiet.close()
    finally:
        kill(r)


@test
def fake_http_prompt_exit():
    # A client in the middle of its headers, one that sends nothing and a
    # 100-second delta profile are all open when the VM ends: it must exit
    # at once all the same, the delta answered 503.
    out = fresh("fake_exit.pb.gz")
    r = Running([C.fake_vm, "--workload=leak", "--rounds=2000", "--idle=stdin",
                 agent("heapprof", f"interval=64k,http=0,file={out},top=0")], stdin=subprocess.PIPE)
    try:
        port = r.wait_port()
        r.wait_for(r"fake_vm: idle")
        d = socket.create_connection(("127.0.0.1", port), timeout=60)
        d.sendall(b"GET /debug/pprof/heap?seconds=100 HTTP/1.1\r\nHost: x\r\n\r\n")
        delta = {}

        def get_delta():
            with d:
                delta["reply"] = read_reply(d)
        t = threading.Thread(target=get_delta)
        t.start()
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"GET /debug/pprof/heap HTTP/1.1\r\nHos")
        quiet = socket.create_connection(("127.0.0.1", port))
        # Workers take connections in order: once a later request is
        # answered, the delta's request is being handled.
        check(http_get(port, "/debug/pprof/")[0] == 200, "index")
    finally:
        r.p.stdin.close()  # the VM ends now
    start = time.time()
    code, err = r.finish(timeout=60)
    took = time.time() - start
    t.join(timeout=30)
    check(code == 0 and f"heapprof: wrote {out}" in err, err)
    check(took < 50, f"the VM took {took:.1f} s to exit")
    check(delta.get("reply", (None,))[0] == 503 and b"exiting" in delta["reply"][2],
          f"delta: {delta}")
    for s in (slow, quiet):
        s.settimeout(10)
        try:
            check(s.recv(1) == b"", "client left open")
        except ConnectionResetError:
            pass
        s.close()


def serves_heap(http, served_re, client_host):
    """heapprof on the fake VM with http=`http` says it serves on an address
    matching `served_re`, and answers a heap request sent to `client_host`."""
    r = Running([C.fake_vm, "--workload=leak", "--idle=60",
                 agent("heapprof", f"interval=64k,http={http},file=,top=0")])
    try:
        m = r.wait_for(rf"heapprof: serving http://{served_re}:(\d+)/debug/pprof/heap\n")
        with urllib.request.urlopen(f"http://{client_host}:{m.group(1)}/debug/pprof/heap",
                                    timeout=20) as u:
            check(u.status == 200 and u.read()[:2] == b"\x1f\x8b", f"heap at http={http}")
    finally:
        kill(r)


@test
def fake_http_addresses():
    for opt in ("http=example.com:0", "http=1.2.3.4.5:0", "http=[::1]:x", "http=:0",
                "http=127.0.0.1:", "http=::1:0:"):
        check_bad(lambda a: [C.fake_vm, a], "heapprof", opt)
    # localhost:PORT (Go users' habit) is the IPv4 loopback.
    serves_heap("localhost:0", r"127\.0\.0\.1", "localhost")
    # A fixed port held by another VM: refused at load (no SO_REUSEPORT sharing).
    first = Running([C.fake_vm, "--workload=leak", "--idle=60",
                     agent("heapprof", "interval=64k,http=127.0.0.1:0,file=,top=0")])
    port = first.wait_port()
    try:
        r = fake("leak", [agent("heapprof", f"http={port},file=")], timeout=60)
        check(r.returncode != 0 and
              f"heapprof: bad option 'http={port}': cannot listen on 127.0.0.1:{port}: "
              "Address already in use" in r.stderr, r.stderr)
    finally:
        kill(first)
    # IPv6 loopback, and a warning for addresses other than loopback.
    serves_heap("[::1]:0", r"\[::1\]", "[::1]")
    r = fake("leak", [agent("heapprof", "http=0.0.0.0:0,file=,top=0")], timeout=60)
    check(r.returncode == 0 and re.search(
        r"heapprof: serving http://0\.0\.0\.0:\d+/debug/pprof/heap\n"
        r"heapprof: warning: profiles are served to anyone who can reach 0\.0\.0\.0:\d+ "
        r"\(no authentication\)\n", r.stderr), r.stderr)


@test
def fake_http_module_loaded_on_demand():
    # cpp-httplib (and the OpenSSL it links) is mapped only with http=.
    for opts, want in (("file=,top=0", False), ("http=0,file=,top=0", True)):
        r = Running([C.fake_vm, "--workload=leak", "--idle=60", agent("heapprof", opts)])
        try:
            r.wait_for(r"fake_vm: idle")
            with open(f"/proc/{r.p.pid}/maps") as f:
                maps = f.read()
            check(("libcpp-httplib" in maps) == want and ("libheapprof_http.so" in maps) == want,
                  f"{opts}: libcpp-httplib mapped: {'libcpp-httplib' in maps}")
        finally:
            kill(r)


def phases(idle, during):
    """tests/tools/phases.mv under heapprof with a young generation that
    phases 1-3 do not fill (no collection before phase 4)."""
    r = Running([C.minivm, "--young=64m", agent("heapprof", "interval=4k,http=0,file=,top=0"),
                 os.path.join(HERE, "phases.mv"), str(idle), str(during)])
    r.wait_port()
    return r


def wait_for_leaf(run_, fn, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st, _, body = run_.fetch("/debug/pprof/allocs?debug=1")
        if any(k.startswith(fn + " ") for k in parse_legacy(body.decode())):
            return
        time.sleep(0.05)
    raise AssertionError(f"{fn} never allocated")


@test
def vm_http_gc_under_dense_sampling():
    """?gc=1 asked again and again while the program samples every 4 KiB and
    heapprof tags every sample, until the program ends: every request is
    answered (a forced collection's delivery never waits behind the
    sampling thread's tag operations), and the final collection's figure
    counts only what is alive, nothing: the ObjectFree events of a ?gc=1
    collection in flight when the VM began to end were delivered before
    VMDeath (docs/agent-api.md, "Delivery rules")."""
    need_vm()
    r = Running([C.minivm, agent("heapprof", "interval=4k,http=0,file=,top=1"),
                 os.path.join(HERE, "dense_garbage.mv"), "10000000"])
    answered = refused = 0
    try:
        r.wait_port()
        while r.p.poll() is None:
            asked = time.monotonic()
            try:
                st, _, _ = r.fetch("/debug/pprof/heap?gc=1&debug=1")
                check(st == 200, f"status {st}")
                answered += 1
                # Paced, not back to back: a full collection stops the program,
                # so requests with no gap would leave it no time to run (under
                # TSan a collection takes a second and the program never ends).
                # Waiting as long as the answer took gives it half the time.
                time.sleep(max(0.01, time.monotonic() - asked))
            except (urllib.error.URLError, ConnectionError, OSError):
                refused += 1  # the VM is ending: its server stopped
                time.sleep(0.01)
        r.finish()
    finally:
        kill(r)
    err = r.stderr()
    check(r.p.returncode == 0, err)
    check(answered > 0, f"no ?gc=1 answered:\n{err}")
    check(re.search(r" 0 B live after a full collection at exit", err),
          f"objects counted live at exit after {answered} ?gc=1 requests:\n{err[-2000:]}")


@test
def vm_http_gc_runs_a_collection():
    need_vm()
    r = phases(60, 0)
    try:
        wait_for_leaf(r, "idle_marker")  # phases 1 and 2 are over, nothing allocates
        def inuse(target):
            st, _, body = r.fetch(target)
            out = {}
            for k, v in parse_legacy(body.decode()).items():
                fn = k.split()[0]
                out[fn] = out.get(fn, 0) + v[1]
            return out
        before = inuse("/debug/pprof/heap?debug=1")
        check(before.get("garbage", 0) > 0 and before.get("before", 0) > 0,
              f"no collection yet, so the garbage is in use: {before}")
        after = inuse("/debug/pprof/heap?gc=1&debug=1")
        check(after.get("garbage", 0) == 0 and after.get("before") == before["before"],
              f"after gc=1: {after} (before: {before})")
        if C.go:
            top = pprof(["-top", f"http://127.0.0.1:{r.port}/debug/pprof/heap?gc=1"])
            check("Type: inuse_space" in top and " before" in top and " garbage" not in top, top)
    finally:
        kill(r)


@test
def vm_http_delta_profile():
    need_go()
    need_vm()
    r = phases(0, 8)
    try:
        wait_for_leaf(r, "during")  # phases 1-3 are over
        out = pprof(["-raw", "-seconds=2", f"http://127.0.0.1:{r.port}/debug/pprof/allocs"])
        m = re.search(r"\nDuration: (\d+\.\d+)\n", out)  # the window: N s and the snapshots
        check(m and 2.0 <= float(m.group(1)) < 30, out)
        locations = out.split("\nLocations\n")[1]
        check(" during " in locations and " before " not in locations and
              " garbage " not in locations, f"the delta has what was allocated before:\n{out}")
        top = pprof(["-top", "-seconds=1", f"http://127.0.0.1:{r.port}/debug/pprof/heap"])
        check("Type: inuse_space" in top and re.search(r"Duration: 1(\.\d+)?s,", top), top)
    finally:
        kill(r)


@test
def vm_sigusr2():
    need_vm()
    d = fresh("vm_sig")
    os.makedirs(d)
    r = Running([C.minivm, agent("heapprof", f"interval=64k,http=0,file={d}/h.pb.gz"),
                 os.path.join(HERE, "spin.mv"), "4"])
    r.wait_port()
    try:
        time.sleep(1)
        r.p.send_signal(signal.SIGUSR2)
        r.wait_for(r"heapprof: wrote \S+h\.0001\.pb\.gz \(SIGUSR2", timeout=10)
    finally:
        code, err = r.finish()
    check(code == 0, err)
    check_heap_profile(read_profile(f"{d}/h.0001.pb.gz"))


@test
def vm_thread_filter():
    need_vm()
    out = fresh("vm_thr.pb.gz")
    r = vm([agent("heapprof", f"interval=16k,threads=thread-2,file={out}"),
            os.path.join(HERE, "threads.mv")], seed=1)
    check(r.returncode == 0, r.stderr)
    threads = {s["labels"]["thread"] for s in read_profile(out)["samples"]}
    check(threads == {"thread-2"}, f"threads {threads}")
    out2 = fresh("vm_thr_all.pb.gz")
    r = vm([agent("heapprof", f"interval=16k,file={out2}"), os.path.join(HERE, "threads.mv")],
           seed=1)
    threads = {s["labels"]["thread"] for s in read_profile(out2)["samples"]}
    check(threads == {"main", "thread-1", "thread-2"}, f"threads {threads}")


@test
def vm_all_three_agents_together():
    need_vm()
    out = fresh("vm_three.pb.gz")
    r = vm([agent("heapprof", f"file={out},interval=64k"), agent("leakcheck"),
            agent("lifetimes"), os.path.join(HERE, "leaky.mv"), "100000"], seed=1)
    check(r.returncode == 0, r.stderr)
    for name in ("heapprof", "leakcheck", "lifetimes"):
        check(f"\n{name}:" in "\n" + r.stderr, f"no {name} output:\n{r.stderr}")
    check_heap_profile(read_profile(out))


@test
def vm_heap_profile_flag():
    need_vm()
    h = run([C.minivm, "--help"])
    if "--heap-profile" not in h.stdout + h.stderr:
        raise Skip("minivm has no --heap-profile option yet")
    out = fresh("vm_flag.pb.gz")
    r = vm([f"--heap-profile={out}", os.path.join(HERE, "leaky.mv"), "50000"])
    check(r.returncode == 0, r.stderr)
    check(f"heapprof: wrote {out}" in r.stderr, r.stderr)
    check_heap_profile(read_profile(out))
