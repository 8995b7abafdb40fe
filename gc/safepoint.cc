#include "gc/safepoint.h"

#include <algorithm>

#include "gc/check.h"
#include "gc/mutator_data.h"

namespace minivm::gc {

std::atomic<SafepointState>& SafepointManager::StateOf(Mutator* m) {
  return MutatorData::Of(m)->state;
}

void SafepointManager::ParkLocked(Mutator* m) {
  std::atomic<SafepointState>& state = StateOf(m);
  const SafepointState saved = state.load(std::memory_order_relaxed);
  state.store(SafepointState::kStopped);
  cv_.SignalAll();
  while (active_) cv_.Wait(&mu_);
  state.store(saved);
}

SafepointState SafepointManager::StateOfSelf(Mutator* m) {
  return StateOf(m).load(std::memory_order_relaxed);
}

bool SafepointManager::OthersStoppedLocked() const {
  for (Mutator* m : mutators_) {
    if (m == owner_) continue;
    const SafepointState state = StateOf(m).load();
    if (state == SafepointState::kRunning) return false;
    if (permanent_ && state == SafepointState::kNative) return false;  // safepoint.h .death
  }
  return true;
}

void SafepointManager::Attach(Mutator* m) {
  base::MutexLock lock(&mu_);
  while (active_) cv_.Wait(&mu_);
  StateOf(m).store(SafepointState::kRunning);
  mutators_.push_back(m);
}

void SafepointManager::Detach(Mutator* m) {
  base::MutexLock lock(&mu_);
  if (active_ && owner_ != m) ParkLocked(m);
  auto it = std::find(mutators_.begin(), mutators_.end(), m);
  MINIVM_GC_CHECK(it != mutators_.end(), "detaching a mutator that is not attached");
  mutators_.erase(it);
  m->poll.store(0, std::memory_order_relaxed);
}

bool SafepointManager::Begin(Mutator* requester) {
  base::MutexLock lock(&mu_);
  if (active_ && permanent_ && owner_ == requester && owner_thread_ == std::this_thread::get_id()) {
    return true;
  }
  if (active_) {
    if (requester != nullptr) {
      ParkLocked(requester);  // forever, if the stop is permanent: as it must
    } else {
      // A non-mutator (an agent's own thread) must not wait for a permanent
      // stop to end: it never does, and the VM's last callback may be
      // joining this very thread. Callers see stopped_for_good() and give up.
      while (active_ && !permanent_) cv_.Wait(&mu_);
    }
    return false;
  }
  active_ = true;
  owner_ = requester;
  owner_thread_ = std::this_thread::get_id();
  for (Mutator* m : mutators_) {
    if (m != requester) m->poll.store(1, std::memory_order_release);
  }
  while (!OthersStoppedLocked()) cv_.Wait(&mu_);
  return true;
}

void SafepointManager::BeginPermanent(Mutator* requester) {
  base::MutexLock lock(&mu_);
  while (active_) {
    // Another thread's safepoint: let it finish (or, if the VM is already
    // dying on another thread, park for good, as any mutator would).
    if (requester != nullptr) {
      ParkLocked(requester);
    } else {
      cv_.Wait(&mu_);
    }
  }
  active_ = true;
  permanent_ = true;  // from now on non-mutators give up on Begin (safepoint.h .death)
  owner_ = requester;
  owner_thread_ = std::this_thread::get_id();
  for (Mutator* m : mutators_) {
    if (m != requester) m->poll.store(1, std::memory_order_release);
  }
  cv_.SignalAll();  // non-mutators waiting in Begin give up (see Begin)
  while (!OthersStoppedLocked()) cv_.Wait(&mu_);
}

bool SafepointManager::OwnedByCallingThread() const {
  base::MutexLock lock(&mu_);
  return active_ && owner_thread_ == std::this_thread::get_id();
}

bool SafepointManager::stopped_for_good() const {
  base::MutexLock lock(&mu_);
  return permanent_;
}

void SafepointManager::End(Mutator* requester) {
  base::MutexLock lock(&mu_);
  if (permanent_) return;
  MINIVM_GC_CHECK(active_ && owner_ == requester, "ending a safepoint the caller does not own");
  active_ = false;
  owner_ = nullptr;
  for (Mutator* m : mutators_) m->poll.store(0, std::memory_order_relaxed);
  cv_.SignalAll();
}

void SafepointManager::Poll(Mutator* m) {
  base::MutexLock lock(&mu_);
  if (active_ && owner_ != m) ParkLocked(m);
  // A stale request (the safepoint ended before we polled) is just cleared;
  // a new one cannot be set concurrently because Begin holds mu_.
  if (!active_) m->poll.store(0, std::memory_order_relaxed);
}

SafepointState SafepointManager::SetState(Mutator* m, SafepointState to) {
  MINIVM_GC_DCHECK(to != SafepointState::kStopped, "only the protocol parks a thread");
  std::atomic<SafepointState>& state = StateOf(m);
  const SafepointState from = state.load(std::memory_order_relaxed);  // ours alone to write
  if (from == to) return from;
  // Dekker-style, all seq_cst: this thread stores its state then loads
  // active_; an owner stores active_ (Begin) then loads every state. At least
  // one sees the other's store, so either the owner sees the new state, or
  // this thread sees the safepoint and settles it under the mutex below.
  state.store(to);
  if (!active_.load()) return from;  // the fast path: two atomic accesses
  base::MutexLock lock(&mu_);
  if (to == SafepointState::kRunning) {
    // Back into the heap: never in the middle of another thread's pause.
    // The owner may have seen kRunning meanwhile and be waiting: parking
    // wakes it.
    if (active_ && owner_ != m) ParkLocked(m);
  } else if (permanent_ && owner_ != m && from == SafepointState::kBlocked) {
    // VM death (safepoint.h .death) counted this thread as stopped while it was
    // blocked, typically a callback waiting on a raw monitor. Back in
    // native it would run agent code alongside VMDeath, which must be the
    // last event: it parks for good instead.
    ParkLocked(m);
  } else {
    cv_.SignalAll();  // the owner may be waiting for this thread
  }
  return from;
}

size_t SafepointManager::mutator_count() const {
  base::MutexLock lock(&mu_);
  return mutators_.size();
}

}  // namespace minivm::gc
