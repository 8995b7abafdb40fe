// VMTI raw monitors (JVMTI's CreateRawMonitor ... RawMonitorNotifyAll).
//
// Design
// ------
// .handles  Handles. A vmtiRawMonitorID is an opaque token (a counter, never
//    reused, never 0), looked up in one registry on every call: a destroyed,
//    forged or NULL handle gives VMTI_ERROR_INVALID_MONITOR and is never
//    dereferenced (the same rule as vmtiObject tokens). A monitor's memory
//    lives as long as any call still uses it (shared ownership), so a
//    DestroyRawMonitor racing with a thread blocked on the monitor wakes that
//    thread with INVALID_MONITOR instead of freeing memory under it.
// .semantics  Semantics are JVMTI's: reentrant; the owner is an OS thread (any
//    thread: VM threads in callbacks, agent threads, an agent's own
//    pthreads); Exit/Wait/Notify/NotifyAll by a thread that does not own the
//    monitor give NOT_MONITOR_OWNER; Wait releases every recursion level and
//    restores it before returning; millis <= 0 waits until notified; Notify
//    wakes one waiter, NotifyAll every waiter (no spurious returns: a waiter
//    returns when notified, timed out, interrupted or the monitor destroyed).
//    DestroyRawMonitor of a monitor another thread owns: NOT_MONITOR_OWNER;
//    one the caller owns is released and destroyed (JVMTI).
// .safepoints  Safepoints. Every blocking step (waiting to enter, waiting to be
//    notified) runs inside a SafepointSafeScope (agent_api/thread_states.h), which makes a
//    VM thread safepoint-safe while it blocks; a thread never waits for a
//    safepoint to end while it owns a monitor it has just taken: it waits
//    for the monitor to be free inside the region, leaves the region (which
//    waits out any collection) without owning it, and only then takes it,
//    retrying if another thread was faster. So a collection's
//    GarbageCollectionStart/Finish callbacks can enter a monitor that a
//    thread blocked in RawMonitorEnter was about to get.
// .interrupt  INTERRUPT. minivm has no thread interruption. Once VM death begins
//    (before the VMDeath callbacks run), a RawMonitorWait on an agent thread
//    (RunAgentThread) returns VMTI_ERROR_INTERRUPT, with the monitor owned
//    again: a wait in progress is woken, a later one returns at once. It
//    tells the agent's thread that the VM is ending, so that it can leave
//    even if the agent never notifies it. Waits on other threads are not
//    interrupted.
// Rejected: absl::Mutex for the monitor's own lock (TSan cannot see its
// happens-before edges in the distribution's Abseil; std::mutex it can),
// and taking the monitor inside the blocked region (a thread that got the
// monitor while a collection ran would hold it while waiting for the
// collection, and a GC callback entering it would deadlock).
#ifndef MINIVM_AGENT_API_RAW_MONITORS_H_
#define MINIVM_AGENT_API_RAW_MONITORS_H_

#include "vmti/vmti.h"

namespace minivm::agent {

vmtiError CreateRawMonitorImpl(const char* name, vmtiRawMonitorID* monitor_ptr);
vmtiError DestroyRawMonitorImpl(vmtiRawMonitorID monitor);
vmtiError RawMonitorEnterImpl(vmtiRawMonitorID monitor);
vmtiError RawMonitorExitImpl(vmtiRawMonitorID monitor);
vmtiError RawMonitorWaitImpl(vmtiRawMonitorID monitor, vmtiLong millis);
vmtiError RawMonitorNotifyImpl(vmtiRawMonitorID monitor, bool all);

// VM death has begun: wakes every agent thread waiting in RawMonitorWait
// with VMTI_ERROR_INTERRUPT, and makes later waits on agent threads return
// it at once (.interrupt). Idempotent.
void InterruptAgentThreadWaits();

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_RAW_MONITORS_H_
