#!/usr/bin/env python3
"""Runs minivm's language tests: .mv files with inline expectations.

Usage:
  run_tests.py --minivm PATH [--jobs N] [--filter SUBSTR] [--threaded-only]
               [--vm-arg ARG ...]
               [--timeout SECONDS] [--allow-follow-on-errors] [--list] [--verbose]
               DIR_OR_FILE...

Each test is run as `minivm [vm-args] [options] file.mv [args]` and its
stdout, stderr and exit code are checked against comments in the file:

  // expect: TEXT                 the next stdout line is exactly TEXT. Every
                                  stdout line must be expected, in order.
  // expect runtime error: TEXT   stderr's first line starts with
                                  `error: TEXT`, the next line is a trace
                                  line, and every further stderr line is
                                  indented (trace only; not checked when
                                  --vm-arg is given); exit code 1.
  // expect trace: at fn (F:N)    stderr has a line `  at fn (<...F>:N)`;
                                  trace expectations match in order.
  // expect error line N[: TEXT]  a compile error `...:N:<col>: error: ...`
                                  (containing TEXT if given); exit code 2;
                                  no stdout; stderr holds only such lines,
                                  in source order. Every expectation must be
                                  met by its own reported error, and every
                                  reported error must be expected (with
                                  --allow-follow-on-errors, an extra error on
                                  a line that expects one is accepted).
  // expect error[: TEXT]         the same, for the line the comment is on.
  // expect exit: N               exit code N (default: 1 with a runtime
                                  error, 2 with compile errors, else 0).
  // expect stderr: TEXT          some stderr line contains TEXT.
  // expect output contains: TEXT some stdout or stderr line contains TEXT.
  // expect no stdout line: TEXT  no stdout line is exactly TEXT.
  // expect stderr lines: N       stderr has exactly N lines (not checked
                                  when --vm-arg is given).
  // stdout: unchecked            stdout lines need not be expected (for
                                  output that is not fixed, e.g. --help).
  // runs: N                      run N times; every run must pass and all
                                  runs must print the same stdout.
  // args: a b c                  program arguments (shell-like quoting).
  // options: --seed=3            VM options, placed before the file.
  // agent: NAME[=OPTIONS]        -agentpath:<--agent-dir>/libNAME.so[=OPTIONS],
                                  before the options (repeatable, in order).
  // no program file              run without the file (and without args):
                                  `minivm [vm-args] [options]`.
  // address space limit: SIZE    run under `ulimit -v` (RLIMIT_AS) of SIZE
                                  (bytes, or with k, m, g). Skipped where
                                  `minivm --version` cannot start under that
                                  limit (sanitizer builds map terabytes of
                                  shadow memory).
  // run with stdout: TARGET      stdout goes to TARGET, `closed` (`>&-`)
  // run with stderr: TARGET      or a file such as /dev/full, instead of
                                  the runner's pipe (what is not piped is
                                  not checked; stdout need not be expected).
  // skip: REASON                 the test is not run; counted as skipped.

--forbid-stderr=TEXT fails any run whose stderr has a line containing TEXT
(the JIT suites use it with --verbose:jit to require that every function
compiles).

--vm-arg adds an option to every run (e.g. --vm-arg=--gc-stress=1); it may
be given several times. Use the `--vm-arg=VALUE` form, or `--vm-arg VALUE`.

The last line of output is `N passed, M failed` (`, K skipped` if any); the
exit code is 0 exactly when nothing failed.
"""

import argparse
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
import threading

DEFAULT_TIMEOUT = 60.0

EXPECT_RE = re.compile(r"//\s*expect:(?: |$)(.*)$")
RUNTIME_ERROR_RE = re.compile(r"//\s*expect runtime error:\s*(.*?)\s*$")
TRACE_RE = re.compile(r"//\s*expect trace:\s*at\s+(\S+)\s+\((.*):(\d+)\)\s*$")
ERROR_LINE_RE = re.compile(r"//\s*expect error line (\d+)(?::\s*(.*?))?\s*$")
ERROR_HERE_RE = re.compile(r"//\s*expect error(?::\s*(.*?))?\s*$")
EXIT_RE = re.compile(r"//\s*expect exit:\s*(-?\d+)\s*$")
STDERR_RE = re.compile(r"//\s*expect stderr:\s*(.*?)\s*$")
OUTPUT_RE = re.compile(r"//\s*expect output contains:\s*(.*?)\s*$")
STDERR_LINES_RE = re.compile(r"//\s*expect stderr lines:\s*(\d+)\s*$")
NO_LINE_RE = re.compile(r"//\s*expect no stdout line:\s*(.*?)\s*$")
UNCHECKED_RE = re.compile(r"//\s*stdout:\s*unchecked\s*$")
RUNS_RE = re.compile(r"//\s*runs:\s*(\d+)\s*$")
ARGS_RE = re.compile(r"//\s*args:(.*)$")
OPTIONS_RE = re.compile(r"//\s*options:(.*)$")
AGENT_RE = re.compile(r"//\s*agent:\s*(\S+)\s*$")

# --agent-dir: where `// agent: NAME[=OPTIONS]` finds libNAME.so.
AGENT_DIR = None
NO_FILE_RE = re.compile(r"//\s*no program file\s*$")
REDIRECT_RE = re.compile(r"//\s*run with (stdout|stderr):\s*(\S+)\s*$")
LIMIT_AS_RE = re.compile(r"//\s*address space limit:\s*(\d+)([kKmMgG]?)\s*$")
SKIP_RE = re.compile(r"//\s*skip:\s*(.*?)\s*$")

COMPILE_ERROR_RE = re.compile(r":(\d+):(\d+): error: ?(.*)$")
TRACE_LINE_RE = re.compile(r"^  at \S+ \(.+:\d+\)$")


class Spec:
    """What one test file expects."""

    def __init__(self, path):
        self.path = path
        self.stdout = []          # expected stdout lines, in order
        self.runtime_error = None  # text after `error: `
        self.traces = []          # (fn, file, line)
        self.compile_errors = []  # (line, text or None)
        self.exit_code = None
        self.stderr_contains = []
        self.output_contains = []
        self.stdout_lacks = []
        self.stderr_lines = None
        self.stdout_unchecked = False
        self.runs = 1
        self.args = []
        self.options = []
        self.agents = []          # `// agent: NAME[=OPTIONS]`, in order
        self.no_file = False
        self.limit_as = None      # `// address space limit:`, in bytes
        self.redirect = {}        # `// run with stdout|stderr:`: stream -> target
        self.skip = None
        self.problems = []        # malformed directives


def _runtime_error(spec, m, lineno):
    if spec.runtime_error is not None:
        spec.problems.append(f"line {lineno}: second `expect runtime error`")
    spec.runtime_error = m.group(1)


def _redirect(spec, m, lineno):
    spec.redirect[m.group(1)] = m.group(2)
    if m.group(1) == "stdout":
        spec.stdout_unchecked = True


def _malformed(what):
    return lambda spec, m, lineno: spec.problems.append(f"line {lineno}: malformed `{what}`")


# The directives, in the order they are tried on a line that has `//`: the
# first pattern that matches applies its action (spec, match, line number).
# A malformed directive is matched by a looser pattern after the strict one.
DIRECTIVES = [
    (EXPECT_RE, lambda spec, m, lineno: spec.stdout.append(m.group(1))),
    (RUNTIME_ERROR_RE, _runtime_error),
    (TRACE_RE, lambda spec, m, lineno: spec.traces.append(
        (m.group(1), m.group(2), int(m.group(3))))),
    (re.compile(r"//\s*expect trace:"), _malformed("expect trace")),
    (ERROR_LINE_RE, lambda spec, m, lineno: spec.compile_errors.append(
        (int(m.group(1)), m.group(2) or None))),
    (ERROR_HERE_RE, lambda spec, m, lineno: spec.compile_errors.append(
        (lineno, m.group(1) or None))),
    (EXIT_RE, lambda spec, m, lineno: setattr(spec, "exit_code", int(m.group(1)))),
    (STDERR_RE, lambda spec, m, lineno: spec.stderr_contains.append(m.group(1))),
    (OUTPUT_RE, lambda spec, m, lineno: spec.output_contains.append(m.group(1))),
    (STDERR_LINES_RE, lambda spec, m, lineno: setattr(spec, "stderr_lines", int(m.group(1)))),
    (NO_LINE_RE, lambda spec, m, lineno: spec.stdout_lacks.append(m.group(1))),
    (UNCHECKED_RE, lambda spec, m, lineno: setattr(spec, "stdout_unchecked", True)),
    (RUNS_RE, lambda spec, m, lineno: setattr(spec, "runs", max(1, int(m.group(1))))),
    (ARGS_RE, lambda spec, m, lineno: spec.args.extend(shlex.split(m.group(1)))),
    (AGENT_RE, lambda spec, m, lineno: spec.agents.append(m.group(1))),
    (OPTIONS_RE, lambda spec, m, lineno: spec.options.extend(shlex.split(m.group(1)))),
    (NO_FILE_RE, lambda spec, m, lineno: setattr(spec, "no_file", True)),
    (REDIRECT_RE, _redirect),
    (LIMIT_AS_RE, lambda spec, m, lineno: setattr(
        spec, "limit_as",
        int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()])),
    (re.compile(r"//\s*address space limit:"), _malformed("address space limit")),
    (SKIP_RE, lambda spec, m, lineno: setattr(spec, "skip", m.group(1) or "skipped")),
]
UNRECOGNISED_RE = re.compile(r"//\s*expect\b")


def parse_spec(path):
    spec = Spec(path)
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if "//" not in line:
            continue
        for pattern, action in DIRECTIVES:
            m = pattern.search(line)
            if m:
                action(spec, m, lineno)
                break
        else:
            if UNRECOGNISED_RE.search(line):
                spec.problems.append(f"line {lineno}: unrecognised expectation: {line.strip()}")
    if spec.runtime_error is not None and spec.compile_errors:
        spec.problems.append("both a runtime error and compile errors are expected")
    return spec


def expected_exit(spec):
    if spec.exit_code is not None:
        return spec.exit_code
    if spec.compile_errors:
        return 2
    if spec.runtime_error is not None:
        return 1
    return 0


def trace_line_matches(line, fn, file, lineno):
    prefix = f"  at {fn} ("
    if not line.startswith(prefix) or not line.endswith(")"):
        return False
    location = line[len(prefix):-1]
    path, sep, num = location.rpartition(":")
    if not sep or num != str(lineno):
        return False
    return path == file or path.endswith("/" + file)


def check_run(spec, stdout, stderr, code, allow_follow_on=False, lenient_stderr=False):
    """Returns a list of failure descriptions (empty when the run passed)."""
    failures = []
    out_lines = stdout.split("\n")
    if out_lines and out_lines[-1] == "":
        out_lines.pop()
    err_lines = stderr.split("\n")
    if err_lines and err_lines[-1] == "":
        err_lines.pop()

    want_code = expected_exit(spec)
    if code != want_code:
        failures.append(f"exit code: expected {want_code}, got {code}")

    # stdout
    if spec.compile_errors:
        if out_lines:
            failures.append(f"stdout: expected nothing (compile error), got {len(out_lines)} line(s)")
    elif not spec.stdout_unchecked:
        for i, want in enumerate(spec.stdout):
            if i >= len(out_lines):
                failures.append(f"stdout line {i + 1}: expected {want!r}, got end of output")
                break
            if out_lines[i].rstrip("\r") != want:
                failures.append(f"stdout line {i + 1}: expected {want!r}, got {out_lines[i]!r}")
                break
        else:
            if len(out_lines) > len(spec.stdout):
                failures.append(
                    f"stdout line {len(spec.stdout) + 1}: unexpected {out_lines[len(spec.stdout)]!r}"
                    f" ({len(out_lines) - len(spec.stdout)} extra line(s))")

    # runtime error
    if spec.runtime_error is not None:
        want = "error: " + spec.runtime_error
        at = 0
        if lenient_stderr:
            # Extra VM options may print lines of their own (--verbose:gc).
            while at < len(err_lines) and not err_lines[at].startswith("error: "):
                at += 1
        first = err_lines[at] if at < len(err_lines) else None
        if first is None or not first.startswith(want):
            failures.append(f"stderr first line: expected to start with {want!r}, got {first!r}")
        elif len(err_lines) < at + 2 or not TRACE_LINE_RE.match(err_lines[at + 1]):
            second = err_lines[at + 1] if len(err_lines) > at + 1 else None
            failures.append(f"stderr: expected a stack trace line `  at fn (file:line)` after the error, got {second!r}")
        elif not lenient_stderr:
            # One error line, then only the trace (indented lines): a second
            # report, say from another thread failing at the same time, is wrong.
            extra = [l for l in err_lines[1:] if not l.startswith("  ")]
            if extra:
                failures.append(f"stderr: expected only the error line and its trace, also got {extra[0]!r}")

    # stack trace lines, in order
    pos = 0
    for fn, file, lineno in spec.traces:
        for j in range(pos, len(err_lines)):
            if trace_line_matches(err_lines[j], fn, file, lineno):
                pos = j + 1
                break
        else:
            failures.append(f"stderr: expected trace line '  at {fn} (...{file}:{lineno})' (in order)")
            break

    # compile errors: every expectation met, every reported error expected
    if spec.compile_errors:
        reported = []
        positions = []
        for l in err_lines:
            m = COMPILE_ERROR_RE.search(l)
            if m:
                reported.append((int(m.group(1)), l))
                positions.append((int(m.group(1)), int(m.group(2))))
            elif l.strip():
                failures.append(f"stderr: expected only `file:line:col: error: ...` lines, got {l!r}")
        if positions != sorted(positions):
            failures.append("compile errors: not reported in source order")
        used = [False] * len(reported)
        for line, text in spec.compile_errors:
            for k, (rline, rtext) in enumerate(reported):
                if not used[k] and rline == line and (text is None or text in rtext):
                    used[k] = True
                    break
            else:
                desc = f"line {line}" + (f" containing {text!r}" if text else "")
                failures.append(f"compile error: expected one on {desc}, not reported")
        expected_lines = {line for line, _ in spec.compile_errors}
        for k, (rline, rtext) in enumerate(reported):
            # With allow_follow_on, a follow-on error on a line that is
            # expected to have one (say, a missing ';' after an unterminated
            # string) is not counted as a new error.
            if not used[k] and (not allow_follow_on or rline not in expected_lines):
                failures.append(f"compile error: unexpected {rtext!r}")

    for text in spec.stderr_contains:
        if not any(text in l for l in err_lines):
            failures.append(f"stderr: expected a line containing {text!r}")
    if spec.stderr_lines is not None and not lenient_stderr and len(err_lines) != spec.stderr_lines:
        failures.append(f"stderr: expected {spec.stderr_lines} line(s), got {len(err_lines)}")
    for text in spec.stdout_lacks:
        if any(l.rstrip("\r") == text for l in out_lines):
            failures.append(f"stdout: expected no line {text!r}, but there is one")
    for text in spec.output_contains:
        if not any(text in l for l in out_lines + err_lines):
            failures.append(f"output: expected a line containing {text!r}")
    return failures


def command_for(spec, minivm, vm_args):
    agents = []
    for a in spec.agents:
        name, eq, opts = a.partition("=")
        agents.append(f"-agentpath:{os.path.join(AGENT_DIR or '.', 'lib' + name + '.so')}{eq}{opts}")
    cmd = [minivm] + agents + vm_args + spec.options
    if not spec.no_file:
        cmd += [spec.path] + spec.args
    return cmd


def with_limit(cmd, limit_as, redirect=None):
    """cmd under `ulimit -v` and with stdout/stderr redirected, through a
    shell (not preexec_fn: the runner has threads)."""
    if limit_as is None and not redirect:
        return cmd
    script = f"ulimit -v {limit_as >> 10} && " if limit_as is not None else ""
    script += 'exec "$0" "$@"'
    for stream, fd in (("stdout", 1), ("stderr", 2)):
        target = (redirect or {}).get(stream)
        if target == "closed":
            script += f" {fd}>&-"
        elif target is not None:
            script += f" {fd}>{shlex.quote(target)}"
    return ["/bin/sh", "-c", script] + cmd


_LIMIT_PROBES = {}
_LIMIT_PROBES_LOCK = threading.Lock()


def vm_starts_under(minivm, limit_as):
    """Whether `minivm --version` runs with its address space limited to limit_as."""
    with _LIMIT_PROBES_LOCK:
        if limit_as not in _LIMIT_PROBES:
            code, _, _, _ = run_once(with_limit([minivm, "--version"], limit_as), 60)
            _LIMIT_PROBES[limit_as] = code == 0
        return _LIMIT_PROBES[limit_as]


def run_once(cmd, timeout):
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        return None, "", f"cannot run {cmd[0]}: {e}", False
    try:
        out, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            p.kill()
        out, err = p.communicate()
        timed_out = True
    return (p.returncode,
            out.decode("utf-8", errors="replace"),
            err.decode("utf-8", errors="replace"),
            timed_out)


def describe_code(code):
    if code is None:
        return "none"
    if code < 0:
        return f"{code} (killed by signal {-code})"
    return str(code)


def run_test(spec, minivm, vm_args, timeout, allow_follow_on=False, forbid_stderr=()):
    """Returns (status, report) where status is 'pass', 'fail' or 'skip'."""
    if spec.skip is not None:
        return "skip", f"SKIP {spec.path}: {spec.skip}"
    if spec.problems:
        return "fail", f"FAIL {spec.path}\n" + "".join(f"  bad test: {p}\n" for p in spec.problems)
    if spec.limit_as is not None and not vm_starts_under(minivm, spec.limit_as):
        return "skip", (f"SKIP {spec.path}: the VM cannot start with its address space limited to "
                        f"{spec.limit_as} bytes (a sanitizer build?)")
    cmd = with_limit(command_for(spec, minivm, vm_args), spec.limit_as, spec.redirect)
    first_stdout = None
    for run in range(spec.runs):
        code, out, err, timed_out = run_once(cmd, timeout)
        if timed_out:
            failures = [f"timed out after {timeout:g} s"]
        elif code is None:
            failures = [err]
        else:
            failures = check_run(spec, out, err, code, allow_follow_on, lenient_stderr=bool(vm_args))
            for text in forbid_stderr:
                for line in err.split("\n"):
                    if text in line:
                        failures.append(f"stderr has a forbidden line: {line}")
            if code < 0:
                failures.insert(0, f"the VM crashed: {describe_code(code)}")
            if first_stdout is None:
                first_stdout = out
            elif out != first_stdout and not failures:
                failures.append(f"run {run + 1} printed a different stdout from run 1")
        if failures:
            report = [f"FAIL {spec.path}" + (f" (run {run + 1} of {spec.runs})" if spec.runs > 1 else "")]
            report.append("  command: " + " ".join(shlex.quote(c) for c in cmd))
            report += ["  " + f for f in failures]
            report.append(f"  exit code: {describe_code(code)}")
            report += excerpt("stdout", out)
            report += excerpt("stderr", err)
            return "fail", "\n".join(report) + "\n"
    return "pass", f"PASS {spec.path}"


def excerpt(name, text, limit=12):
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return [f"  {name}: (empty)"]
    shown = [f"  {name}:"] + [f"    | {l}" for l in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"    | ... ({len(lines) - limit} more line(s))")
    return shown


def find_tests(paths):
    found = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    if f.endswith(".mv"):
                        found.append(os.path.join(root, f))
        elif os.path.isfile(p):
            found.append(p)
        else:
            print(f"run_tests.py: no such file or directory: {p}", file=sys.stderr)
            sys.exit(2)
    return found


def starts_threads(path):
    """Whether the program uses spawn: a run where mutators race each other
    (and the collector and samplers), which is what the TSan build's JIT
    suites are for. Agent threads are covered by the agent suite's
    interpreter run, which TSan runs in full."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return re.search(r"\bspawn\b", f.read()) is not None


def normalise_argv(argv):
    """Lets `--vm-arg --gc-stress=1` work (argparse would take the value for an option)."""
    result = []
    i = 0
    while i < len(argv):
        if argv[i] == "--vm-arg" and i + 1 < len(argv):
            result.append("--vm-arg=" + argv[i + 1])
            i += 2
        else:
            result.append(argv[i])
            i += 1
    return result


def main():
    parser = argparse.ArgumentParser(description="Run minivm language tests (.mv files with inline expectations).")
    parser.add_argument("--minivm", help="path to the minivm binary")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="tests run in parallel (default 2)")
    parser.add_argument("--filter", action="append", default=[],
                        help="only tests whose path contains SUBSTR (repeatable: any matches)")
    parser.add_argument("--threaded-only", action="store_true",
                        help="only programs that start threads (use spawn): the TSan build's JIT suites")
    parser.add_argument("--vm-arg", action="append", default=[], help="an option for every run, e.g. --vm-arg=--jit=off")
    parser.add_argument("--forbid-stderr", action="append", default=[], metavar="TEXT",
                        help="fail a run whose stderr has a line containing TEXT (repeatable)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per run (default 60)")
    parser.add_argument("--allow-follow-on-errors", action="store_true",
                        help="accept extra compile errors on a line that expects one")
    parser.add_argument("--agent-dir", help="where `// agent: NAME` finds libNAME.so")
    parser.add_argument("--list", action="store_true", help="list the tests that would run, and exit")
    parser.add_argument("--verbose", "-v", action="store_true", help="print passing tests too")
    parser.add_argument("paths", nargs="+", metavar="DIR_OR_FILE")
    args = parser.parse_args(normalise_argv(sys.argv[1:]))

    tests = find_tests(args.paths)
    if args.filter:
        tests = [t for t in tests if any(f in t for f in args.filter)]
    if args.threaded_only:
        tests = [t for t in tests if starts_threads(t)]
    if args.list:
        for t in tests:
            print(t)
        print(f"{len(tests)} test(s)")
        return 0
    if not args.minivm:
        parser.error("--minivm is required (unless --list)")
    minivm = args.minivm
    if not os.path.isfile(minivm) or not os.access(minivm, os.X_OK):
        print(f"run_tests.py: not an executable: {minivm}", file=sys.stderr)
        return 2

    global AGENT_DIR
    AGENT_DIR = os.path.abspath(args.agent_dir) if args.agent_dir else None
    specs = [parse_spec(t) for t in tests]
    for spec in specs:
        if spec.agents and AGENT_DIR is None and spec.skip is None:
            spec.skip = "needs --agent-dir for its `// agent:` lines"
    counts = {"pass": 0, "fail": 0, "skip": 0}
    lock = threading.Lock()
    failed_paths = []

    def work(spec):
        status, report = run_test(spec, minivm, args.vm_arg, args.timeout, args.allow_follow_on_errors,
                                  args.forbid_stderr)
        with lock:
            counts[status] += 1
            if status == "fail":
                failed_paths.append(spec.path)
                print(report, flush=True)
            elif args.verbose or status == "skip":
                print(report, flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(work, specs))

    if failed_paths:
        print("Failed:")
        for p in sorted(failed_paths):
            print("  " + p)
    summary = f"{counts['pass']} passed, {counts['fail']} failed"
    if counts["skip"]:
        summary += f", {counts['skip']} skipped"
    print(summary)
    return 0 if counts["fail"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
