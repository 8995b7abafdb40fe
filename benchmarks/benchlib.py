"""What the whole-program benchmark scripts share: running a command once and
reading its CPU time, and counting its instructions under callgrind.

CPU time is user + system of the child alone (os.wait4's rusage), so other
processes on the machine do not enter it; wall-clock time is never used.
"""

import os
import subprocess
import sys


def run_once(cmd, cwd=None):
    """Runs cmd with stdout discarded; returns (CPU seconds, stderr text).

    Exits the script with the command and its stderr if cmd fails: a
    benchmark that measured a failing run would report a wrong figure.
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    # Read stderr before waiting: a child blocked on a full pipe never exits.
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    return usage.ru_utime + usage.ru_stime, err


def count_instructions(cmd):
    """Instructions executed by cmd under callgrind (guest code, JIT code included)."""
    vg = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
          "--smc-check=all-non-file", *cmd]
    proc = subprocess.run(vg, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(vg)}\n{proc.stderr}")
    for line in proc.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[1].split()[0])
    sys.exit(f"no instruction count from callgrind:\n{proc.stderr}")
