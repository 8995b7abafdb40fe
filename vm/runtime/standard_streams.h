// Output that cannot be written is an error, never silent (docs/language.md,
// "Exit codes"): `minivm prog.mv > /dev/full` or `>&-` exits 1 with one line
// on stderr (when stderr itself still works).
//
// Design:
// .buffering  stdout and stderr are stdio streams, stdout fully buffered when it is
//     not a terminal, so a write may fail long after print() returned: at
//     the next buffer flush or only at exit. ferror() is sticky, so one
//     check at exit of each stream (after a final fflush) sees every failure
//     of the run. print() also stops the program at the first failure it
//     sees (VM::WriteLine), as SIGPIPE would for a pipe.
// .closed-fds  A closed descriptor 0, 1 or 2 at start would be handed to the next
//     file the VM or an agent opens (a profile, a socket), and print() would
//     then write into that file. OccupyClosedStandardFds puts /dev/null,
//     opened read-only, on it: no file gets the number, and a write to it
//     still fails (EBADF), as it would have on the closed descriptor.
// .exit-code  A failure turns exit code 0 into 1; a non-zero code (a runtime error,
//     exit(n), a compile error) already says the run failed and is kept, as
//     it carries more information.
// .other-outputs  The VM's other outputs (--perf-map) follow the same rule: a write that
//     fails is noted when it happens (NoteLostOutput) and reported at exit,
//     one line, beside stdout's.
#ifndef MINIVM_VM_RUNTIME_STANDARD_STREAMS_H_
#define MINIVM_VM_RUNTIME_STANDARD_STREAMS_H_

#include <cstdio>
#include <string>

namespace minivm {

// See 2. Call first thing in main, before anything opens a file.
void OccupyClosedStandardFds();

// Flushes `out` and `err` (the VM's print and error streams) and stdout and
// stderr, and returns the exit code to use (see 3.). For each of `out` and
// `err` that failed, prints "minivm: error: cannot write to stdout: <why>"
// (or stderr) on `err` if that still works. `out_errno` is the errno of
// the first failed write to `out` seen during the run, or 0 (the reason a
// flush at exit may no longer know).
int FinishStandardStreams(std::FILE* out, std::FILE* err, int code, int out_errno = 0);

// Ends the process at once with `code`, flushing nothing: for the ends that
// must not wait for a stream (stdout or stderr on a pipe nobody reads). The
// exit_group system call rather than _exit: sanitizer runtimes intercept
// _exit and flush every stdio stream first, which waits for ever on the
// lock of the stream a blocked write holds.
[[noreturn]] void ExitWithoutFlushing(int code);

// See 4. `message` ("--perf-map: cannot write 'F': <why>") is printed by
// FinishStandardStreams as "minivm: error: <message>" and fails the run.
// The first one noted is kept. Any thread.
void NoteLostOutput(std::string message);

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_STANDARD_STREAMS_H_
