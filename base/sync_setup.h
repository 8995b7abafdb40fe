// Process-wide set-up of Abseil's synchronization, which base/sync.h's locks
// (and every other absl::Mutex in the process) are built on. Executables
// call InitSynchronization() first thing in main, before any thread starts.
#ifndef MINIVM_BASE_SYNC_SETUP_H_
#define MINIVM_BASE_SYNC_SETUP_H_

namespace minivm::base {

// Whether absl::Mutex keeps checking lock order (deadlock-cycle detection)
// in this build: yes in debug builds (no NDEBUG) and sanitizer builds, where
// an inverted lock order is worth its cost; no in Release builds.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MINIVM_BASE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MINIVM_BASE_SANITIZED 1
#endif
#endif
#if !defined(NDEBUG) || defined(MINIVM_BASE_SANITIZED)
inline constexpr bool kMutexDeadlockDetection = true;
#else
inline constexpr bool kMutexDeadlockDetection = false;
#endif

// Sets the lock-order mode above and runs Abseil's one-time CPU-frequency
// calibration now, on the calling thread, holding no lock (sync_setup.cc
// says why both matter). Idempotent and thread-safe, but meant to run once,
// before any other thread exists.
void InitSynchronization();

}  // namespace minivm::base

#endif  // MINIVM_BASE_SYNC_SETUP_H_
