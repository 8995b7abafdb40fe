// minivm's locks: absl::Mutex / absl::CondVar, made visible to
// ThreadSanitizer (the heap's, the agent API's, the VM's).
//
// The system Abseil is not built with -fsanitize=thread, so TSan cannot see
// absl::Mutex establish happens-before, and every handoff through the
// safepoint protocol (mutator writes -> GC reads -> mutator resumes)
// would be reported as a race. These thin wrappers add __tsan_release before
// every unlock (and before a CondVar wait) and __tsan_acquire after every
// lock (and after a wait) on the mutex's address: no cost outside TSan
// builds. Rejected: std::mutex (TSan intercepts pthreads, but the project
// standardises on Abseil's Mutex and its thread-safety annotations).
#ifndef MINIVM_BASE_SYNC_H_
#define MINIVM_BASE_SYNC_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#if defined(__SANITIZE_THREAD__)
#define MINIVM_BASE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MINIVM_BASE_TSAN 1
#endif
#endif

#ifdef MINIVM_BASE_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace minivm::base {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    Acquired();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    Releasing();
    mu_.Unlock();
  }

 private:
  friend class CondVar;
#ifdef MINIVM_BASE_TSAN
  void Acquired() { __tsan_acquire(this); }
  void Releasing() { __tsan_release(this); }
#else
  void Acquired() {}
  void Releasing() {}
#endif
  absl::Mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    mu->Releasing();
    cv_.Wait(&mu->mu_);
    mu->Acquired();
  }
  void SignalAll() { cv_.SignalAll(); }

 private:
  absl::CondVar cv_;
};

}  // namespace minivm::base

#endif  // MINIVM_BASE_SYNC_H_
