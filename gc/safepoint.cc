#include "gc/safepoint.h"

#include <algorithm>

#include "gc/check.h"
#include "gc/mutator_data.h"

namespace minivm::gc {

SafepointState& SafepointManager::StateOf(Mutator* m) { return MutatorData::Of(m)->state; }

void SafepointManager::ParkLocked(Mutator* m) {
  SafepointState& state = StateOf(m);
  const SafepointState saved = state;
  state = SafepointState::kStopped;
  cv_.SignalAll();
  while (active_) cv_.Wait(&mu_);
  state = saved;
}

bool SafepointManager::OthersStoppedLocked() const {
  for (Mutator* m : mutators_) {
    if (m != owner_ && StateOf(m) == SafepointState::kRunning) return false;
  }
  return true;
}

void SafepointManager::Attach(Mutator* m) {
  MutexLock lock(&mu_);
  while (active_) cv_.Wait(&mu_);
  StateOf(m) = SafepointState::kRunning;
  mutators_.push_back(m);
}

void SafepointManager::Detach(Mutator* m) {
  MutexLock lock(&mu_);
  if (active_ && owner_ != m) ParkLocked(m);
  auto it = std::find(mutators_.begin(), mutators_.end(), m);
  MINIVM_GC_CHECK(it != mutators_.end(), "detaching a mutator that is not attached");
  mutators_.erase(it);
  m->poll.store(0, std::memory_order_relaxed);
}

bool SafepointManager::Begin(Mutator* requester) {
  MutexLock lock(&mu_);
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
  while (!Begin(requester)) {
  }
  MutexLock lock(&mu_);
  permanent_ = true;
  cv_.SignalAll();  // non-mutators waiting in Begin give up (see Begin)
}

bool SafepointManager::stopped_for_good() const {
  MutexLock lock(&mu_);
  return permanent_;
}

void SafepointManager::End(Mutator* requester) {
  MutexLock lock(&mu_);
  if (permanent_) return;
  MINIVM_GC_CHECK(active_ && owner_ == requester, "ending a safepoint the caller does not own");
  active_ = false;
  owner_ = nullptr;
  for (Mutator* m : mutators_) m->poll.store(0, std::memory_order_relaxed);
  cv_.SignalAll();
}

void SafepointManager::Poll(Mutator* m) {
  MutexLock lock(&mu_);
  if (active_ && owner_ != m) ParkLocked(m);
  // A stale request (the safepoint ended before we polled) is just cleared;
  // a new one cannot be set concurrently because Begin holds mu_.
  if (!active_) m->poll.store(0, std::memory_order_relaxed);
}

void SafepointManager::EnterBlocked(Mutator* m) {
  MutexLock lock(&mu_);
  StateOf(m) = SafepointState::kBlocked;
  cv_.SignalAll();
}

void SafepointManager::LeaveBlocked(Mutator* m) {
  MutexLock lock(&mu_);
  while (active_ && owner_ != m) cv_.Wait(&mu_);
  StateOf(m) = SafepointState::kRunning;
  m->poll.store(0, std::memory_order_relaxed);
}

size_t SafepointManager::mutator_count() const {
  MutexLock lock(&mu_);
  return mutators_.size();
}

}  // namespace minivm::gc
