// Stop-the-world safepoints for several mutator threads, and the thread
// registry they need.
//
// Thread states (SafepointState), as the safepoint owner sees them:
//   kRunning  in the VM: may read and write heap objects and hold raw object
//             addresses; a safepoint waits until it polls.
//   kNative   running agent code (a VMTI callback), JVMTI's "in native": it
//             holds no raw object address (only handles, whose slots are
//             roots), so a safepoint need not wait for it.
//   kBlocked  in a blocking wait the VM itself does (join, a lock, I/O, a
//             raw monitor): touches no heap object; safe likewise.
//   kStopped  parked by the safepoint protocol (a poll, Begin, or a return
//             to kRunning while a safepoint is active).
// A thread changes its own state only: SetState from kRunning to a safe
// state and back, or between the two safe states (a raw monitor wait inside
// a callback). Scopes do it (gc::BlockedScope, agent::NativeScope /
// VmScope / SafepointSafeScope in agent_api/thread_states.h): each remembers
// the state it found and restores it, so states nest as a stack along the
// C++ stack (a callback -> ForceGarbageCollection -> an ObjectFree callback
// -> GetTag is native, VM, native, VM, and unwinds in reverse). A counter
// could not say which layer is innermost; a saved state can.
//
// Protocol:
// .states  Each attached mutator is in one of the states above at any time.
// .begin  A thread that needs the world stopped calls Begin. If another thread's
//    safepoint is in progress, Begin parks the caller as kStopped until it is
//    over and returns false: the caller's TLAB was retired meanwhile and it
//    must retry whatever it wanted (its allocation usually succeeds now).
//    Only one safepoint is ever active, so only one collection runs at a time.
//    A thread in a safe state may call Begin (a callback forcing a
//    collection); it owns the safepoint like any other requester.
// .owner  Otherwise the caller becomes the owner, sets every other mutator's poll
//    word and waits until none is kRunning. A thread that polls
//    (SafepointPoll) parks as kStopped; SetState(kRunning) waits (parked, as
//    kStopped) while a safepoint is active, so a native or blocked thread
//    never re-enters the heap mid-pause. The owner itself may change state
//    freely (the GC start/finish callbacks run on it inside the pause).
// .end  End clears the poll words and wakes everyone. All transitions happen
//    under one mutex, which also orders the mutators' heap writes before the
//    GC's reads and writes before the mutators resume.
// .attach  Attach waits for an active safepoint to end before registering, so it
//    must be called by the new thread itself (or by a thread that is inside a
//    blocked region): a registered running thread waiting there would stall
//    the owner. Detach parks like a poll if a safepoint is active.
// .death  VM death (BeginPermanent) is a safepoint that never ends, and it also
//    waits for kNative threads: callbacks in flight finish (or park, when
//    they call a function that needs the VM) before VMDeath is delivered,
//    so VMDeath stays the last event. It cannot wait for kBlocked threads (a
//    callback waiting on a raw monitor may wait for the dying thread), so a
//    thread that leaves kBlocked for kNative after the stop parks for good:
//    its callback never runs on beside VMDeath. From the moment the
//    permanent stop is requested, non-mutators give up on Begin at once
//    (stopped_for_good), so an agent thread forcing a collection cannot hold
//    up the stop while a callback waits on a lock that agent thread holds.
// .fast-path  SetState's fast path is lock-free, as HotSpot's thread-state
//    transitions: a seq_cst store of the state and a seq_cst load of active_
//    (see SetState for why no wakeup or pause can be missed); the mutex is
//    taken only when a safepoint is active. Rejected: the mutex on every
//    transition (a sample makes two, and they would cost close to half of
//    what the rest of the sample costs; docs/performance.md).
// Rejected: signals or thread suspension (not portable, and cannot know that
// a thread is at a point where its roots are precise); a global read-write
// lock (a thread in a blocked region could not let a collection proceed).
#ifndef MINIVM_GC_SAFEPOINT_H_
#define MINIVM_GC_SAFEPOINT_H_

#include <atomic>
#include <thread>
#include <vector>

#include "base/sync.h"
#include "gc/mutator.h"

namespace minivm::gc {

enum class SafepointState : uint8_t { kRunning, kNative, kBlocked, kStopped };

class SafepointManager {
 public:
  void Attach(Mutator* m);
  void Detach(Mutator* m);

  // See the protocol above. `requester` may be null (a non-mutator thread).
  bool Begin(Mutator* requester);
  void End(Mutator* requester);
  // VM death: stops the world and never restarts it. The owner may still
  // run collections and safepoint operations (Begin returns true at once and
  // End does nothing for it), so agents' VMDeath callbacks can use the heap.
  // A null requester (the VM's signal thread) owns it as an OS thread: other
  // non-mutators (agents' threads) are not the owner.
  void BeginPermanent(Mutator* requester);
  // True once BeginPermanent ran: Begin by anyone but its owner fails (a
  // mutator parks for good; a non-mutator returns false at once).
  bool stopped_for_good() const;
  // True while the calling OS thread owns the active safepoint (it runs a
  // pause's or a heap walk's callbacks): it must not Begin again.
  bool OwnedByCallingThread() const;

  void Poll(Mutator* m);
  // Called by m's own thread. Moves m to `to` (kRunning, kNative or
  // kBlocked) and returns the state it was in, for the caller to restore.
  // Entering kRunning waits, parked, while another thread's safepoint is
  // active. No-op when m is already in `to`.
  SafepointState SetState(Mutator* m, SafepointState to);
  // m's state, read by m's own thread (the only thread that changes it).
  static SafepointState StateOfSelf(Mutator* m) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // Valid while the caller owns the safepoint (between Begin and End).
  const std::vector<Mutator*>& mutators() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return mutators_; }
  size_t mutator_count() const;

 private:
  static std::atomic<SafepointState>& StateOf(Mutator* m);
  void ParkLocked(Mutator* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when no other mutator is kRunning (nor kNative, for the
  // permanent stop: see .death).
  bool OthersStoppedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable base::Mutex mu_;
  base::CondVar cv_;
  // Written under mu_; also read without it by SetState's fast path.
  std::atomic<bool> active_{false};
  bool permanent_ ABSL_GUARDED_BY(mu_) = false;
  Mutator* owner_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The owner's OS thread: tells the owner of a permanent stop apart from
  // other non-mutators when owner_ is null.
  std::thread::id owner_thread_ ABSL_GUARDED_BY(mu_);
  std::vector<Mutator*> mutators_ ABSL_GUARDED_BY(mu_);
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_SAFEPOINT_H_
