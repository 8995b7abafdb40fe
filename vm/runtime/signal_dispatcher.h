// SIGINT, SIGTERM and SIGQUIT end the VM in order: every thread stops at a
// safepoint, agents get VMDeath (so profiles are written), stdout is flushed,
// and the process exits with 128 + the signal (130, 143, 131), as a shell
// expects, within kEndBoundSeconds of the signal plus the time agents spend
// in VMDeath. A second signal ends the process at once. SIGPIPE never ends
// the process: a write to a closed pipe fails with EPIPE instead.
//
// Design
// .no-handler  Nothing runs in a signal handler. StartSignalDispatcher blocks SIGINT
//    and SIGTERM in the calling thread (main, before any other thread
//    exists), so every thread the process creates — VM threads, the JIT's
//    compiler, agents' threads — inherits the mask, and the signals are only
//    ever taken by the dispatcher thread's sigwait. No VM or agent thread
//    sees EINTR because of them.
// .first  The first signal: once a VM is the target (SetSignalTarget), a new
//    shutdown thread calls VM::Shutdown(128 + sig), which stops the VM
//    threads for good (threads blocked in join or output already count as
//    stopped), flushes stdout, posts VMDeath (if VMInit completed) and _exits;
//    the dispatcher goes on listening. Before that (reading and compiling
//    the program, loading agents) there is nothing to write and the process
//    _exits at once. If the VM is already ending (main returned, exit(n), a
//    runtime error), that end goes on with its own exit code, and the
//    signal counts as the first.
// .second  Any later signal: _exit(128 + sig) at once, even in the middle of
//    VMDeath — a half-written profile is what a second Ctrl-C asks for.
// .ignored  A signal ignored when minivm starts (`prog &` in a non-interactive
//    shell ignores SIGINT) stays ignored: blocked signals are queued even
//    when ignored, so it is left out of the set (HotSpot does the same).
// .cost  The cost is one thread asleep in sigwait: nothing on the allocation
//    path or in the interpreter loop, with or without agents.
// .quit  SIGQUIT is taken too. With the attach trigger file present it is a
//    request to start the attach listener (vm/runtime/attach_listener.h)
//    and nothing else; without it, it ends the VM like SIGINT (exit 131:
//    in order, with VMDeath and the program's output, where the default
//    action would dump core and lose both). Ctrl-\ thus still quits. A
//    SIGQUIT ignored at start is taken all the same, for attach requests,
//    and otherwise stays ignored (a script's `prog &` can be attached to).
//    The dispatcher thread is named attach::kMarkerThreadName: the mark
//    minivm-attach checks (with SIGQUIT blocked in every other thread)
//    before it sends SIGQUIT to a process, since to any other program the
//    signal may be fatal. A name in /proc, readable by every user, needs
//    no file the VM would have to make and remove.
// .bound  The end the first signal starts is bounded, so that it ends the
//    process whatever blocks it (a program's stdout that nobody reads, a
//    thread that never reaches a safepoint, an end already under way that is
//    stuck): the dispatcher waits for the next signal with a timeout, and
//    once kEndBoundSeconds have passed since the signal, or since the last
//    agent's VMDeath returned if that is later, it ends the process with
//    128 + the first signal, as a second signal would. Time inside VMDeath
//    is not counted (writing a large profile may take longer than the
//    bound); an agent that blocks there is what a second signal is for. The
//    VM brackets VMDeath with VMDeathBegins/VMDeathEnded for this. Within
//    the bound the VM gives up a stdout that stays blocked (VM::Shutdown),
//    so that a pipe nobody reads does not cost the agents their VMDeath.
// .pipe  SIGPIPE gets a handler that does nothing (as the JVM's), so that a
//    write to a pipe or socket whose reader has gone fails with EPIPE on
//    every thread, the program's stdout included (`minivm prog | head`):
//    print then ends the VM in order, exit code 1 (vm/runtime/standard_streams.h),
//    with VMDeath and profiles. A handler rather than SIG_IGN because an
//    ignored signal stays ignored across exec, in any process an agent
//    starts, and a handler is reset there. A SIGPIPE ignored at start stays
//    ignored, which has the same effect.
// Rejected: a handler that sets a flag the VM threads poll (a thread blocked
// in join or in a write never polls, and a handler can neither flush stdio
// nor call agents); a handler posting a semaphore to the dispatcher, as
// HotSpot does (every thread could then see EINTR from a slow system call,
// agents' threads included); a dispatcher only with agents loaded (without
// agents Ctrl-C must still flush the program's stdout, which the default
// action would discard); a bound on the whole end, VMDeath included (it
// would cut a large profile's write short, where a user who cannot wait has
// the second signal).
// Caveat: a child process an agent starts inherits the blocked mask across
// exec; such an agent should unblock SIGINT and SIGTERM in the child.
#ifndef MINIVM_VM_RUNTIME_SIGNAL_DISPATCHER_H_
#define MINIVM_VM_RUNTIME_SIGNAL_DISPATCHER_H_

namespace minivm {

class VM;

// .bound: how long the end begun by a signal may take, not counting
// agents' time in VMDeath (docs/language.md, "Exit codes").
inline constexpr int kEndBoundSeconds = 5;

// Call once, first thing in main, while main is the only thread.
void StartSignalDispatcher();

// From now on the first signal shuts `vm` down (VM::Shutdown). Call when
// the VM is about to Run; the VM must live until the process ends (minivm
// ends with _exit, never by returning from main, once a VM runs).
void SetSignalTarget(VM* vm);

// Around each posting of VMDeath to the agents (.bound). Any thread.
void VMDeathBegins();
void VMDeathEnded();

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_SIGNAL_DISPATCHER_H_
