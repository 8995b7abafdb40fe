"""pprof profiles: a minimal profile.proto decoder (stdlib only), the checks
every heap profile must pass, per-site estimates against a known truth, and
`go tool pprof` where it is installed."""

import gzip
import math
import os
import subprocess

from harness import C, Skip, check


Z = 5.7  # per-check bound, docs/sampling.md section 4


def need_go():
    if not C.go:
        raise Skip("go not installed (apt-get install golang-go; scripts/setup.sh does it): "
                   "`go tool pprof` checks skipped")


def pprof(args, timeout=120):
    env = dict(os.environ)
    env.setdefault("HOME", C.work)
    env["PPROF_TMPDIR"] = C.work
    r = subprocess.run([C.go, "tool", "pprof", *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout, env=env, cwd=C.work)
    assert r.returncode == 0, f"go tool pprof {' '.join(args)} failed:\n{r.stderr}"
    return r.stdout


# ---- a minimal profile.proto decoder -----------------------------------------

def _varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def _fields(b):
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v = b[i:i + n]
            i += n
        elif wt == 1:
            v = b[i:i + 8]
            i += 8
        elif wt == 5:
            v = b[i:i + 4]
            i += 4
        else:
            raise ValueError(f"wire type {wt}")
        yield f, wt, v


def _ints(wt, v):
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = _varint(v, i)
        out.append(x)
    return out


def _signed(x):
    return x - (1 << 64) if x >= 1 << 63 else x


def decode_profile(data):
    """Returns a dict: sample_type [(type, unit)], samples [{locs, values, labels}],
    locations {id: [(function, file, line)]}, period_type, period, default_sample_type."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    raw = {"st": [], "s": [], "loc": [], "fn": [], "str": [], "pt": None, "period": 0, "dst": 0,
           "mapping": []}
    for f, wt, v in _fields(data):
        if f == 1:
            raw["st"].append(v)
        elif f == 2:
            raw["s"].append(v)
        elif f == 3:
            raw["mapping"].append(v)
        elif f == 4:
            raw["loc"].append(v)
        elif f == 5:
            raw["fn"].append(v)
        elif f == 6:
            raw["str"].append(v.decode())
        elif f == 11:
            raw["pt"] = v
        elif f == 12:
            raw["period"] = v
        elif f == 14:
            raw["dst"] = v
    S = raw["str"]
    check(S and S[0] == "", "string_table[0] must be ''")

    def vt(b):
        d = {f: v for f, _, v in _fields(b)}
        return (S[d.get(1, 0)], S[d.get(2, 0)])

    fns = {}
    for b in raw["fn"]:
        d = {f: v for f, _, v in _fields(b)}
        fns[d[1]] = (S[d.get(2, 0)], S[d.get(4, 0)])
    locs = {}
    for b in raw["loc"]:
        lid, lines = None, []
        for f, wt, v in _fields(b):
            if f == 1:
                lid = v
            elif f == 4:
                d = {ff: vv for ff, _, vv in _fields(v)}
                fn = fns[d[1]]
                lines.append((fn[0], fn[1], _signed(d.get(2, 0))))
        check(lid, "location id 0")
        locs[lid] = lines
    samples = []
    for b in raw["s"]:
        s = {"locs": [], "values": [], "labels": {}}
        for f, wt, v in _fields(b):
            if f == 1:
                s["locs"] += _ints(wt, v)
            elif f == 2:
                s["values"] += [_signed(x) for x in _ints(wt, v)]
            elif f == 3:
                d = {ff: vv for ff, _, vv in _fields(v)}
                key = S[d.get(1, 0)]
                s["labels"][key] = S[d[2]] if 2 in d else d.get(3, 0)
        check(len(s["values"]) == len(raw["st"]), "sample with the wrong number of values")
        for l in s["locs"]:
            check(l in locs, f"sample references unknown location {l}")
        samples.append(s)
    return {"sample_type": [vt(b) for b in raw["st"]], "samples": samples, "locations": locs,
            "period_type": vt(raw["pt"]) if raw["pt"] is not None else None,
            "period": raw["period"], "default_sample_type": S[raw["dst"]],
            "mappings": len(raw["mapping"]),
            "mapping_file": S[{f: v for f, _, v in _fields(raw["mapping"][0])}.get(5, 0)]
            if raw["mapping"] else None}


def read_profile(p):
    with open(p, "rb") as f:
        return decode_profile(f.read())


GO_TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"),
            ("inuse_space", "bytes")]


def check_heap_profile(prof, default="inuse_space"):
    check(prof["sample_type"] == GO_TYPES, f"sample types {prof['sample_type']}")
    check(prof["period_type"] == ("space", "bytes"), f"period type {prof['period_type']}")
    check(prof["default_sample_type"] == default,
          f"default sample type {prof['default_sample_type']!r}")
    check(prof["mappings"] == 1, "want one mapping")
    for s in prof["samples"]:
        check("class" in s["labels"] and "thread" in s["labels"], f"labels {s['labels']}")
        check(s["values"][2] <= s["values"][0] and s["values"][3] <= s["values"][1],
              f"in-use above allocated: {s['values']}")


def by_leaf(prof, index, key=lambda fr: f"{fr[0]} {fr[1]}:{fr[2]}"):
    """Sums value[index] per leaf frame."""
    out = {}
    for s in prof["samples"]:
        fr = prof["locations"][s["locs"][0]][0] if s["locs"] else ("?", "?", 0)
        k = key(fr)
        out[k] = out.get(k, 0) + s["values"][index]
    return out


def check_site_estimates(prof, sizes, interval, seed):
    """Checks the bytes and objects a heap profile estimates for each leaf
    function of `sizes` ({function: (count, size)}, the known allocations)
    within Z sigma of the truth, sigma from the Horvitz-Thompson variance of
    docs/sampling.md (+1 so a zero variance still bounds rounding). Returns
    the number of checks made."""
    got_b = by_leaf(prof, 1, key=lambda fr: fr[0])
    got_o = by_leaf(prof, 0, key=lambda fr: fr[0])
    checks = 0
    for fn, (n, s) in sizes.items():
        p = -math.expm1(-s / interval)
        for got, want, var, what in (
                (got_b.get(fn, 0), n * s, n * s * s * (1 - p) / p, "bytes"),
                (got_o.get(fn, 0), n, n * (1 - p) / p, "objects")):
            sd = math.sqrt(var) + 1
            z = (got - want) / sd
            check(abs(z) <= Z, f"--seed={seed} {fn} {what}: estimate {got}, truth {want}, "
                               f"sd {sd:.0f}, z = {z:.2f}")
            checks += 1
    return checks


def parse_collapsed(text):
    out = {}
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        out[stack] = out.get(stack, 0) + int(n)
    return out
