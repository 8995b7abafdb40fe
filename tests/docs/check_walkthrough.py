#!/usr/bin/env python3
"""docs/architecture.md's allocation walk-through names only code that exists.

The section "One allocation, from `NEW` to the agent's callback" follows one
object through the compiler, both tiers, the heap, the sampler and the agent
API, naming each function on the way. This check keeps it from going stale
silently: every name it gives in code form (in backticks or in its fenced
blocks) must exist somewhere in the product sources (vm, gc, agent_api,
examples, base: the whole tree, not one file, so that code moving between
files does not break it):

  Class::Method, ns::Class::Method   the last two parts: "Class::Method"
                                     is in a source, or `Method` is a word
                                     in a file that declares `Class` (class,
                                     struct or namespace)
  name(...)                          `name` is followed by "(" somewhere
  CamelCase, k*, minivm_*, op_*,     a whole word somewhere
  MINIVM_*, vmti*

Runs without a build:

  tests/docs/check_walkthrough.py [--source-dir DIR]

Exit status 1, with each missing name and its line, when a name is missing.
"""
import argparse
import os
import re
import sys

SOURCE_DIRS = ["vm", "gc", "agent_api", "examples", "base"]
SOURCE_EXTS = (".h", ".cc", ".c", ".cpp", ".hpp", ".inc")
DOC = os.path.join("docs", "architecture.md")
HEADING = "## One allocation"

IDENT = r"[A-Za-z_~][A-Za-z0-9_]*"
QUALIFIED = re.compile(rf"\b{IDENT}(?:::{IDENT})+")
CALL = re.compile(rf"\b({IDENT})\(")
# A bare name in backticks that is a C++ identifier and not an English word
# or an opcode: CamelCase with a lower-case letter, k-constants, minivm_ and
# op_ names.
BARE = re.compile(r"^(?:[A-Z][a-z0-9]+[A-Z][A-Za-z0-9_]*|k[A-Z][A-Za-z0-9_]*|"
                  r"minivm_[a-z0-9_]+|op_[A-Z_]+|MINIVM_[A-Z_]+|vmti[A-Z][A-Za-z]*)$")
# minivm source code in backticks (`new Point(1, 2)`), not C++: not checked.
MINIVM_CODE = re.compile(r"^(?:new|class|fn|var)\b")


def walkthrough(root):
    """(first line number, lines) of the section."""
    path = os.path.join(root, DOC)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith(HEADING)), None)
    if start is None:
        sys.exit(f"{DOC}: no section starting '{HEADING}'")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return start + 1, lines[start:end]


def names_in(first_line, lines):
    """(name, kind, line) for every name the section gives in code form."""
    out = []

    def scan(span, n, bare):
        word = " ".join(span.split())
        if MINIVM_CODE.match(word):
            return
        for q in QUALIFIED.findall(span):
            out.append((q, "qualified", n))
        for c in CALL.findall(span):
            out.append((c, "call", n))
        if bare and BARE.match(word):
            out.append((word, "word", n))

    prose = []  # (line number, text) outside fenced blocks
    in_block = False
    for n, line in enumerate(lines, first_line):
        if line.startswith("```"):
            in_block = not in_block
        elif in_block:
            scan(line, n, bare=False)
        else:
            prose.append((n, line))
    # Backtick spans may wrap onto the next line: scan the prose as one text.
    text = "\n".join(line for _, line in prose)
    starts = []
    pos = 0
    for n, line in prose:
        starts.append((pos, n))
        pos += len(line) + 1
    for m in re.finditer(r"`([^`]+)`", text):
        n = max(ln for p, ln in starts if p <= m.start())
        scan(m.group(1), n, bare=True)
    return out


def load_sources(root):
    texts = {}
    for d in SOURCE_DIRS:
        base = os.path.join(root, d)
        for dirpath, _, files in os.walk(base):
            for f in files:
                if f.endswith(SOURCE_EXTS):
                    p = os.path.join(dirpath, f)
                    with open(p, encoding="utf-8", errors="replace") as fh:
                        texts[os.path.relpath(p, root)] = fh.read()
    return texts


def exists(name, kind, texts):
    if kind == "qualified":
        parts = name.split("::")
        owner, member = parts[-2], parts[-1]
        # Defined out of line (Owner::Member), or declared in a file that
        # declares Owner (a method defined in its class, a namespace's
        # function).
        if any(f"{owner}::{member}" in t for t in texts.values()):
            return True
        declared = re.compile(
            rf"\b(?:class|struct|namespace)\s+(?:{IDENT}::)*{re.escape(owner)}\b")
        member_re = re.compile(rf"\b{re.escape(member)}\b")
        return any(declared.search(t) and member_re.search(t) for t in texts.values())
    if kind == "call":
        call_re = re.compile(rf"\b{re.escape(name)}\s*\(")
        return any(call_re.search(t) for t in texts.values())
    word_re = re.compile(rf"\b{re.escape(name)}\b")
    return any(word_re.search(t) for t in texts.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="list every name checked")
    ap.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))
    args = ap.parse_args()
    first_line, lines = walkthrough(args.source_dir)
    names = names_in(first_line, lines)
    texts = load_sources(args.source_dir)
    if len(names) < 20 or not texts:
        sys.exit(f"{DOC}: found only {len(names)} names and {len(texts)} source files; "
                 "is the section or the tree where this check expects it?")
    missing = [(name, kind, n) for name, kind, n in names if not exists(name, kind, texts)]
    checked = sorted({name for name, _, _ in names})
    if args.verbose:
        for name, kind, n in sorted(set(names)):
            print(f"{DOC}:{n}: {kind} {name}")
    for name, kind, n in missing:
        print(f"{DOC}:{n}: `{name}` ({kind}) is not in {', '.join(SOURCE_DIRS)}")
    print(f"{len(checked)} names checked, {len({m[0] for m in missing})} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
