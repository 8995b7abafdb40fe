#!/usr/bin/env python3
"""Every named design point the JIT's files cite exists, and none is cited by number.

A design point is defined in a file's design block as a comment line
`// .name  text` (MPS-style, docs/jit.md "Files") and cited as `.name` in
the same file or `file.cc .name` from another. This check reads vm/jit/,
vm/runtime/thread.h and docs/jit.md and fails on
  - a citation `file.h .name` or `file.cc .name` of a vm/jit file that does
    not define .name;
  - a citation `.name` in a vm/jit file's comments that the file itself
    does not define;
  - a `.name` in backquotes in docs/jit.md that no vm/jit file defines;
  - a design cited by number ("design 12", "design point 3").

  check_design_names.py --root .
"""
import argparse
import os
import re
import sys

DEFINITION = re.compile(r"^// (\.[a-z][a-z0-9-]*(?:\.[a-z][a-z0-9-]*)*)  ", re.M)
NAME = r"\.[a-z][a-z0-9-]*(?:\.[a-z][a-z0-9-]*)*(?![\w(-])"
QUALIFIED = re.compile(r"\b([a-z_]+\.(?:h|cc))`?\s+`?(" + NAME + ")")
CHAINED = re.compile(r"`?(?:,|,? and)\s+`?(" + NAME + ")")
BARE = re.compile(r"(?:^|(?<=[\s(`]))(" + NAME + ")")
NUMBERED = re.compile(r"design (point )?[0-9]+|designs [0-9]+", re.I)
EXTENSIONS = {".h", ".cc", ".c", ".md", ".mv", ".py", ".so", ".ll", ".txt"}


def comments(text):
    return "\n".join(m.group(1) for m in re.finditer(r"//(.*)", text))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    jit_dir = os.path.join(args.root, "vm", "jit")
    files = {f: open(os.path.join(jit_dir, f), encoding="utf-8").read()
             for f in sorted(os.listdir(jit_dir)) if f.endswith((".h", ".cc"))}
    defined = {f: set(DEFINITION.findall(text)) for f, text in files.items()}
    all_names = set().union(*defined.values())
    others = {p: open(os.path.join(args.root, p), encoding="utf-8").read()
              for p in ("vm/runtime/thread.h", "docs/jit.md")}
    failures = []

    def qualified(text):
        """(file, name, offset) of each citation `file .a, .b and .c`."""
        for m in QUALIFIED.finditer(text):
            yield m.group(1), m.group(2), m.start(2)
            at = m.end(2)
            while (more := CHAINED.match(text, at)):
                yield m.group(1), more.group(1), more.start(1)
                at = more.end(1)

    def check_qualified(where, text):
        for target, name, _ in qualified(text):
            if target in defined and name not in defined[target]:
                failures.append(f"{where}: {target} {name}: {target} defines no {name}")

    for f, text in files.items():
        body = comments(text)
        check_qualified(f"vm/jit/{f}", body)
        qualified_spans = {at for _, _, at in qualified(body)}
        for m in BARE.finditer(body):
            name = m.group(1)
            if name in EXTENSIONS or m.start(1) in qualified_spans:
                continue
            if name not in defined[f]:
                failures.append(f"vm/jit/{f}: {name}: not defined in this file")
    for path, text in others.items():
        check_qualified(path, comments(text) if path.endswith(".h") else text)
    for name in re.findall(r"`(" + NAME + ")`", others["docs/jit.md"]):
        if name != ".name" and name not in all_names:
            failures.append(f"docs/jit.md: `{name}`: no vm/jit file defines it")
    for path, text in [*((f"vm/jit/{f}", t) for f, t in files.items()), *others.items()]:
        for m in NUMBERED.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            failures.append(f"{path}:{line}: a design cited by number: {m.group(0)!r}")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print(f"PASS: {sum(len(d) for d in defined.values())} design points in "
          f"{sum(1 for d in defined.values() if d)} files of vm/jit; every citation resolves")


if __name__ == "__main__":
    main()
