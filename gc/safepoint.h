// Stop-the-world safepoints for several mutator threads, and the thread
// registry they need.
//
// Protocol:
// 1. Each attached mutator is kRunning, kBlocked (inside EnterBlocked /
//    LeaveBlocked: touches no heap object) or kStopped (parked at a poll).
// 2. A thread that needs the world stopped calls Begin. If another thread's
//    safepoint is in progress, Begin parks the caller as kStopped until it is
//    over and returns false: the caller's TLAB was retired meanwhile and it
//    must retry whatever it wanted (its allocation usually succeeds now).
//    Only one safepoint is ever active, so only one collection runs at a time.
// 3. Otherwise the caller becomes the owner, sets every other mutator's poll
//    word and waits until each is kStopped or kBlocked. A thread that polls
//    (SafepointPoll) parks as kStopped; LeaveBlocked waits while a safepoint
//    is active, so a blocked thread never re-enters the heap mid-pause.
// 4. End clears the poll words and wakes everyone. All transitions happen
//    under one mutex, which also orders the mutators' heap writes before the
//    GC's reads and writes before the mutators resume.
// 5. Attach waits for an active safepoint to end before registering, so it
//    must be called by the new thread itself (or by a thread that is inside a
//    blocked region): a registered running thread waiting there would stall
//    the owner. Detach parks like a poll if a safepoint is active.
// Rejected: signals or thread suspension (not portable, and cannot know that
// a thread is at a point where its roots are precise); a global read-write
// lock (a thread in a blocked region could not let a collection proceed).
#ifndef MINIVM_GC_SAFEPOINT_H_
#define MINIVM_GC_SAFEPOINT_H_

#include <thread>
#include <vector>

#include "gc/mutator.h"
#include "gc/sync.h"

namespace minivm::gc {

enum class SafepointState : uint8_t { kRunning, kBlocked, kStopped };

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

  void Poll(Mutator* m);
  void EnterBlocked(Mutator* m);
  void LeaveBlocked(Mutator* m);

  // Valid while the caller owns the safepoint (between Begin and End).
  const std::vector<Mutator*>& mutators() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return mutators_; }
  size_t mutator_count() const;

 private:
  static SafepointState& StateOf(Mutator* m);
  void ParkLocked(Mutator* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool OthersStoppedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  CondVar cv_;
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  bool permanent_ ABSL_GUARDED_BY(mu_) = false;
  Mutator* owner_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The owner's OS thread: tells the owner of a permanent stop apart from
  // other non-mutators when owner_ is null.
  std::thread::id owner_thread_ ABSL_GUARDED_BY(mu_);
  std::vector<Mutator*> mutators_ ABSL_GUARDED_BY(mu_);
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_SAFEPOINT_H_
