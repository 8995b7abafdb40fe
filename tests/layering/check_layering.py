#!/usr/bin/env python3
"""The dependency rules of docs/architecture.md, checked two ways.

1. Source: no file under gc/ includes a vm/ or agent_api/ header (or the
   public vmti/ header), and no file under vm/runtime/ includes an agent_api/,
   vmti/ or vm/jit/ header; a relative include ("../") counts as a breach,
   since it would step around the include roots.
2. Build: with the exact flags the build compiles each of those components'
   sources with (compile_commands.json), the forbidden headers cannot even be
   found, while the component's own headers can. This is what makes rule 1
   hold for code written tomorrow: the compiler refuses it.

Usage: check_layering.py --source-dir DIR --build-dir DIR
Prints each breach on one line and exits 1 if there is any.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import verdict  # noqa: E402 (tests/checklib.py)

# component folder -> (forbidden include prefixes, one of the forbidden
# headers to probe, one of its own headers that must be found)
RULES = {
    "gc": (("vm/", "agent_api/", "vmti/"), ("vm/runtime/vm.h", "agent_api/tool_interface.h"),
           "gc/heap.h"),
    "vm/runtime": (("agent_api/", "vmti/", "vm/jit/"),
                   ("agent_api/tool_interface.h", "vm/jit/runtime.h", "vmti/vmti.h"),
                   "vm/runtime/vm.h"),
}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def check_sources(source_dir):
    breaches = []
    for component, (forbidden, _, _) in RULES.items():
        root = os.path.join(source_dir, component)
        for dirpath, _, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        header = m.group(1)
                        if header.startswith(forbidden) or "../" in header:
                            rel = os.path.relpath(path, source_dir)
                            breaches.append(f"{rel}:{lineno}: {component}/ includes {header}")
    return breaches


def compile_flags(entry):
    """The entry's command with the output, input and dependency-file options
    removed, ready to preprocess another file."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    if os.path.basename(args[0]) == "ccache":
        args = args[1:]
    out = [args[0]]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
            skip = a != "-c"
            continue
        if a in ("-MD", "-MMD") or a == entry["file"] or a.endswith(".cc"):
            continue
        out.append(a)
    return out


def preprocess(flags, header, directory):
    with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as probe:
        probe.write(f'#include "{header}"\n')
    try:
        r = subprocess.run(flags + ["-E", "-o", os.devnull, probe.name], cwd=directory,
                           capture_output=True, text=True)
    finally:
        os.unlink(probe.name)
    return r.returncode, r.stderr


def check_build(source_dir, build_dir):
    breaches = []
    with open(os.path.join(build_dir, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    for component, (_, probes, own) in RULES.items():
        prefix = os.path.join(os.path.realpath(source_dir), component) + os.sep
        mine = [e for e in entries if os.path.realpath(e["file"]).startswith(prefix)]
        if not mine:
            breaches.append(f"{component}: no sources in compile_commands.json")
            continue
        seen = set()
        for e in mine:
            flags = compile_flags(e)
            if tuple(flags) in seen:
                continue
            seen.add(tuple(flags))
            rel = os.path.relpath(e["file"], source_dir)
            code, err = preprocess(flags, own, e["directory"])
            if code != 0:
                breaches.append(f"{rel}: its own header {own} is not found: {err.strip()}")
                continue
            for header in probes:
                # Not found means the compiler says so of this very header
                # (a header that is found may fail on its own includes).
                code, err = preprocess(flags, header, e["directory"])
                if code == 0 or f"{header}: No such file" not in err:
                    breaches.append(f"{rel}: the build lets {component}/ include {header}")
    return breaches


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    breaches = check_sources(args.source_dir) + check_build(args.source_dir, args.build_dir)
    for b in breaches:
        print(b)
    return verdict(breaches, "layering: gc/ and vm/runtime/ include only what they may, and "
                   "can find nothing else", failed="layering breach(es); rules: docs/architecture.md")


if __name__ == "__main__":
    sys.exit(main())
