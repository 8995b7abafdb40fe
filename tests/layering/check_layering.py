#!/usr/bin/env python3
"""The dependency rules of docs/architecture.md, checked three ways.

1. Source: every #include "..." of a product file (base/, gc/, vm/,
   agent_api/, examples/) is resolved the way the build resolves it: beside
   the including file, then under the include roots (the project root for
   "base/...", "gc/...", "vm/...", "agent_api/..."; agent_api/include for
   "vmti/..."; examples/agents/common and examples/collector, the folders the
   tool libraries export). The component the header belongs to must be one
   the including component may use (COMPONENTS below). A header that resolves
   to no file of ours is a system or third-party one; only vm/jit may include
   LLVM's. In the VM and its agent API a relative include ("../") counts as a
   breach, since it would step around the include roots; the tool agents and
   the collector, which also build on their own against an installed minivm,
   reach their shared code that way.
2. Build: with the exact flags the build compiles each component's sources
   with (compile_commands.json), headers it may not include cannot even be
   found, while its own can (PROBES). This is what makes rule 1 hold for code
   written tomorrow: the compiler refuses it.
3. Design-point names (check_design_names.py): every `.name` reference is
   defined somewhere, and no design point is referred to by number.

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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checklib import verdict  # noqa: E402 (tests/checklib.py)
import check_design_names  # noqa: E402

# Components, by folder (a file belongs to the longest folder that holds it),
# and the components each may include besides itself. "vmti" is the public C
# header; it includes nothing of ours.
COMPONENTS = {
    "base": (),
    "gc": ("base",),
    "vm/bytecode": ("base", "gc"),
    "vm/compiler": ("base", "gc", "vm/bytecode"),
    "vm/runtime": ("base", "gc", "vm/bytecode"),
    "vm/jit": ("base", "gc", "vm/bytecode", "vm/runtime"),
    "vm/attach": ("vm/runtime/attach_protocol.h",),
    "vm/main.cc": ("base", "gc", "vm/bytecode", "vm/compiler", "vm/runtime", "vm/jit",
                   "agent_api", "vmti"),
    "agent_api/include/vmti": (),
    "agent_api": ("base", "gc", "vm/runtime", "vmti"),
    "examples/agents/common": ("vmti",),
    "examples/agents/minimal": ("vmti",),
    "examples/agents/heapprof": ("vmti", "examples/agents/common"),
    "examples/agents/leakcheck": ("vmti", "examples/agents/common"),
    "examples/agents/lifetimes": ("vmti", "examples/agents/common"),
    # The thin agent of the collector shares its ring buffer and protocol.
    "examples/agents/remote": ("vmti", "examples/agents/common", "examples/collector/protocol.h",
                               "examples/collector/ring_buffer.h",
                               "examples/collector/socket_util.h"),
    # The collector compiles heapprof's aggregation and pprof writer in.
    "examples/collector": ("vmti", "examples/agents/common",
                           "examples/agents/heapprof/heap_profile.h"),
}
ALIASES = {"agent_api/include/vmti": "vmti"}
# Where a folder's files reach each other with "../": allowed only here.
RELATIVE_OK = ("examples/",)
# The only component that may include LLVM.
LLVM_USERS = ("vm/jit",)
SCANNED = ("base", "gc", "vm", "agent_api", "examples")
# Include roots, in the order the build searches them after the including
# file's own folder.
ROOTS = ("", "agent_api/include", "examples/agents/common", "examples/collector")

# component folder -> (forbidden headers to probe, own headers that must be
# found), with the build's flags for the component's sources.
NOT_OURS = ("agent_api/tool_interface.h", "vm/jit/jit.h", "vm/runtime/vm.h", "gc/heap.h",
            "base/sync.h")
PROBES = {
    "base": (("gc/heap.h", "vm/runtime/vm.h", "agent_api/tool_interface.h", "vmti/vmti.h"),
             ("base/sync.h",)),
    "gc": (("vm/runtime/vm.h", "agent_api/tool_interface.h", "vmti/vmti.h"),
           ("gc/heap.h", "base/sync.h")),
    "vm/compiler": (("vm/runtime/vm.h", "vm/jit/jit.h", "agent_api/tool_interface.h",
                     "vmti/vmti.h"), ("vm/compiler/compiler.h", "gc/object.h")),
    "vm/runtime": (("agent_api/tool_interface.h", "vm/jit/runtime.h", "vmti/vmti.h"),
                   ("vm/runtime/vm.h",)),
    "vm/jit": (("agent_api/tool_interface.h", "vmti/vmti.h"), ("vm/jit/jit.h",)),
    "vm/attach": (("agent_api/tool_interface.h", "vm/jit/jit.h", "vmti/vmti.h"),
                  ("vm/runtime/attach_protocol.h",)),
    "agent_api": (("vm/jit/jit.h",), ("agent_api/tool_interface.h", "vmti/vmti.h")),
    "examples/agents": (NOT_OURS, ("vmti/vmti.h",)),
    "examples/collector": (NOT_OURS, ("protocol.h",)),
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def component_of(rel):
    """The component a repository path belongs to, or None if it is in none."""
    best = None
    for c in COMPONENTS:
        if rel == c or rel.startswith(c + "/"):
            if best is None or len(c) > len(best):
                best = c
    return best


def resolve(source_dir, including_rel, header):
    """The repository path `header` names from `including_rel`, or None if
    it is not one of our files."""
    candidates = [os.path.join(os.path.dirname(including_rel), header)]
    candidates += [os.path.join(root, header) for root in ROOTS]
    for c in candidates:
        rel = os.path.normpath(c)
        if not rel.startswith("..") and os.path.isfile(os.path.join(source_dir, rel)):
            return rel
    return None


def allowed(component, target_rel):
    """Whether `component` may include the file `target_rel`."""
    target = component_of(target_rel)
    if target is None or target == component:
        return True
    for a in COMPONENTS[component]:
        if a == ALIASES.get(target, target) or target_rel == a:
            return True
    return False


def check_sources(source_dir):
    breaches = []
    for top in SCANNED:
        for dirpath, dirs, files in os.walk(os.path.join(source_dir, top)):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".c")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, source_dir)
                component = component_of(rel)
                if component is None:
                    breaches.append(f"{rel}: in no component of check_layering.py")
                    continue
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        header = m.group(2)
                        where = f"{rel}:{lineno}: {component} includes {header}"
                        if "../" in header and not rel.startswith(RELATIVE_OK):
                            breaches.append(f"{where} (a relative include)")
                            continue
                        if header.startswith(("llvm/", "llvm-c/")) and component not in LLVM_USERS:
                            breaches.append(f"{where} (only vm/jit includes LLVM)")
                            continue
                        target = resolve(source_dir, rel, header) if m.group(1) == '"' else None
                        if target is not None and not allowed(component, target):
                            breaches.append(f"{where} ({target}, of {component_of(target)})")
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
        if a in ("-MD", "-MMD") or a == entry["file"] or a.endswith((".cc", ".c")):
            continue
        out.append(a)
    return out


def preprocess(flags, header, directory, suffix):
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as probe:
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
    for component, (probes, own) in PROBES.items():
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
            suffix = os.path.splitext(e["file"])[1]
            missing = False
            for header in own:
                code, err = preprocess(flags, header, e["directory"], suffix)
                if code != 0:
                    breaches.append(f"{rel}: its own header {header} is not found: {err.strip()}")
                    missing = True
            if missing:
                continue
            for header in probes:
                # Not found means the compiler says so of this very header
                # (a header that is found may fail on its own includes).
                code, err = preprocess(flags, header, e["directory"], suffix)
                if code == 0 or f"{header}: No such file" not in err:
                    breaches.append(f"{rel}: the build lets {component}/ include {header}")
    return breaches


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    breaches = check_sources(args.source_dir) + check_build(args.source_dir, args.build_dir)
    breaches += check_design_names.check(args.source_dir)
    for b in breaches:
        print(b)
    return verdict(breaches, "layering: every component includes only what it may, and can "
                   "find nothing else; every design-point name is defined",
                   failed="layering breach(es); rules: docs/architecture.md")


if __name__ == "__main__":
    sys.exit(main())
