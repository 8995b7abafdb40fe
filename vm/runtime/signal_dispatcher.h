// SIGINT, SIGTERM and SIGQUIT end the VM in order: every thread stops at a
// safepoint, agents get VMDeath (so profiles are written), stdout is flushed,
// and the process exits with 128 + the signal (130, 143, 131), as a shell
// expects. A second signal ends the process at once.
//
// Design
// 1. Nothing runs in a signal handler. StartSignalDispatcher blocks SIGINT
//    and SIGTERM in the calling thread (main, before any other thread
//    exists), so every thread the process creates — VM threads, the JIT's
//    compiler, agents' threads — inherits the mask, and the signals are only
//    ever taken by the dispatcher thread's sigwait. No VM or agent thread
//    sees EINTR because of them.
// 2. The first signal: once a VM is the target (SetSignalTarget), a new
//    shutdown thread calls VM::Shutdown(128 + sig), which stops the VM
//    threads for good (threads blocked in join or output already count as
//    stopped), flushes stdout, posts VMDeath (if VMInit completed) and _exits;
//    the dispatcher goes on listening. Before that (reading and compiling
//    the program, loading agents) there is nothing to write and the process
//    _exits at once. If the VM is already ending (main returned, exit(n), a
//    runtime error), that end goes on with its own exit code, and the
//    signal counts as the first.
// 3. Any later signal: _exit(128 + sig) at once, even in the middle of
//    VMDeath — a half-written profile is what a second Ctrl-C asks for.
// 4. A signal ignored when minivm starts (`prog &` in a non-interactive
//    shell ignores SIGINT) stays ignored: blocked signals are queued even
//    when ignored, so it is left out of the set (HotSpot does the same).
// 5. The cost is one thread asleep in sigwait: nothing on the allocation
//    path or in the interpreter loop, with or without agents.
// 6. SIGQUIT is taken too. With the attach trigger file present it is a
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
// Rejected: a handler that sets a flag the VM threads poll (a thread blocked
// in join or in a write never polls, and a handler can neither flush stdio
// nor call agents); a handler posting a semaphore to the dispatcher, as
// HotSpot does (every thread could then see EINTR from a slow system call,
// agents' threads included); a dispatcher only with agents loaded (without
// agents Ctrl-C must still flush the program's stdout, which the default
// action would discard).
// Caveat: a child process an agent starts inherits the blocked mask across
// exec; such an agent should unblock SIGINT and SIGTERM in the child.
#ifndef MINIVM_VM_RUNTIME_SIGNAL_DISPATCHER_H_
#define MINIVM_VM_RUNTIME_SIGNAL_DISPATCHER_H_

namespace minivm {

class VM;

// Call once, first thing in main, while main is the only thread.
void StartSignalDispatcher();

// From now on the first signal shuts `vm` down (VM::Shutdown). Call when
// the VM is about to Run; the VM must live until the process ends (minivm
// ends with _exit, never by returning from main, once a VM runs).
void SetSignalTarget(VM* vm);

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_SIGNAL_DISPATCHER_H_
