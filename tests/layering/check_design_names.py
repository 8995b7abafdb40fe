#!/usr/bin/env python3
"""Design points are referred to by name, and every name referred to exists.

A design block (the comment that states a file's design and its rejected
alternatives) names each point MPS-style, and code and docs refer to a point
by its name. The grammar, which this check applies to base/, gc/, vm/,
agent_api/, examples/, benchmarks/, tests/ and docs/:

Definition: a comment line (C/C++ `//`, or `#` in Python and CMake) whose
  text, after the comment marker and any spaces, starts with the name
  followed by two spaces or by a colon:
      // .frame.lazy  Frames are written only when...
      // .frame.lazy: ...
  A name is `.` then one or more segments separated by `.`; a segment is a
  lower-case letter followed by lower-case letters, digits and `-`
  (`.pool`, `.record.reuse`, `.agent-threads`, `.tag.at-delivery`).
  Names are scoped by file: two files may both define `.lock`.

Reference: a name, in a comment of a source file (the text after `//` or
  `#`, or a line of a /* */ block) or anywhere in a docs/*.md file outside
  fenced code blocks, that is
  - preceded by the start of the line, whitespace, a backtick, `(` or `[`,
    so `heap.h`, `x.size` and `../common` are not references, and
  - followed by a character that cannot continue a name (not a letter,
    digit, `-`, `_`, `/` or `(`; a final `.`, as at the end of a sentence,
    is not part of the name), so method calls such as `.Get()` are not, and
    not by `=` (a C designated initializer, `.interval = 0`), and
  - not a file extension or file name: a name whose first segment is in
    NOT_NAMES (`.h`, `.cc`, `.mv`, `.so`, ...; and `.name` itself, the
    placeholder docs use when they describe this grammar) is not a
    reference.
  A reference preceded by a file name (`tags.h .record.reuse`, `tags.h's
  .record`, `(tags.h, .record)`) must be defined in a file of that name;
  any other reference must be defined in its own file or, failing that, in
  some file of the tree.

Numbered references: "design N", "design point N", "designs N and M"
  (any case) in base/, gc/, vm/, agent_api/ and examples/ are breaches:
  points have names.

Usage: check_design_names.py --source-dir DIR
Prints each breach on one line and exits 1 if there is any.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from checklib import verdict  # noqa: E402 (tests/checklib.py)

SEGMENT = r"[a-z][a-z0-9-]*"
NAME = rf"\.{SEGMENT}(?:\.{SEGMENT})*"
DEFINITION = re.compile(rf"^\s*(?://+|#+|\*)\s*({NAME})(?:  |:)")
REFERENCE = re.compile(rf"(?:^|(?<=[\s`(\[]))({NAME})(?![\w/(-]|\.[a-z]|\s*=)")
# The file name just before a reference, with "'s", a comma or "(" between.
FILE_BEFORE = re.compile(r"([\w./-]+\.(?:h|cc|c|py|md))(?:'s)?,?[\s`(]*$")
NUMBERED = re.compile(r"designs? (points? )?[0-9]+", re.IGNORECASE)
# First segments that make a file extension or an ELF section, not a name;
# and `.name`, which docs use to describe the grammar itself.
NOT_NAMES = {
    "h", "c", "cc", "cpp", "hpp", "mv", "so", "a", "o", "py", "md", "txt", "json", "jsonl",
    "cmake", "sh", "pb", "gz", "pprof", "svg", "html", "csv", "log", "pc", "in", "ll", "s",
    "asm", "bin", "tmp", "out", "yaml", "yml", "toml", "git", "gitignore", "clang-format",
    "clang-tidy", "d", "map", "dump", "dot", "folded", "perf", "data", "trace", "lock", "sock",
    "text", "data", "bss", "rodata",
    "name",  # the placeholder of the grammar, when a doc describes it
}
SOURCE_SUFFIXES = (".h", ".cc", ".c", ".py", ".cmake")
TREES = ("base", "gc", "vm", "agent_api", "examples", "benchmarks", "tests", "docs")
NUMBERED_TREES = ("base", "gc", "vm", "agent_api", "examples")


def comment_texts(path, lines):
    """(line number, text) for each comment (sources) or prose line (docs)."""
    if path.endswith(".md"):
        fenced = False
        for n, line in enumerate(lines, 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                yield n, line
        return
    marker = "#" if path.endswith((".py", ".cmake")) or os.path.basename(path) == "CMakeLists.txt" \
        else "//"
    in_block = False
    for n, line in enumerate(lines, 1):
        if marker == "//":
            if in_block:
                end = line.find("*/")
                yield n, line if end < 0 else line[:end]
                in_block = end < 0
                continue
            start = line.find("/*")
            if start >= 0 and "*/" not in line[start:]:
                in_block = True
                yield n, line[start + 2:]
                continue
        i = line.find(marker)
        if i >= 0:
            yield n, line[i:]


def tree_files(source_dir, trees):
    for top in trees:
        for dirpath, dirs, files in os.walk(os.path.join(source_dir, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES + (".md",)) or name == "CMakeLists.txt":
                    path = os.path.join(dirpath, name)
                    yield os.path.relpath(path, source_dir), path


def read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def is_name(name):
    return name.split(".")[1] not in NOT_NAMES


def check(source_dir):
    breaches = []
    defined = {}  # name -> set of repository paths defining it
    texts = {}
    for rel, path in tree_files(source_dir, TREES):
        lines = read_lines(path)
        texts[rel] = list(comment_texts(rel, lines))
        if not rel.endswith(".md"):
            for line in lines:
                m = DEFINITION.match(line)
                if m and is_name(m.group(1)):
                    defined.setdefault(m.group(1), set()).add(rel)
    for rel, comments in texts.items():
        numbered_scope = rel.startswith(tuple(t + "/" for t in NUMBERED_TREES))
        for n, text in comments:
            if numbered_scope and NUMBERED.search(text):
                breaches.append(f"{rel}:{n}: a design point by number: "
                                f"{NUMBERED.search(text).group(0)!r}")
            for m in REFERENCE.finditer(text):
                name = m.group(1)
                if not is_name(name):
                    continue
                where = defined.get(name, set())
                f = FILE_BEFORE.search(text[:m.start()])
                if f:
                    fname = f.group(1)
                    if not any(p == fname or p.endswith("/" + fname) for p in where):
                        breaches.append(f"{rel}:{n}: {fname} {name} is not defined in {fname}")
                elif not where:
                    breaches.append(f"{rel}:{n}: {name} is defined nowhere")
    return breaches


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    breaches = check(args.source_dir)
    for b in breaches:
        print(b)
    return verdict(breaches, "design names: every reference names a defined point, none a number",
                   failed="design-name breach(es); grammar: tests/layering/check_design_names.py")


if __name__ == "__main__":
    sys.exit(main())
