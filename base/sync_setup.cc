// What InitSynchronization settles, and why at start-up.
//
// Lock-order checking. Debian's libabsl is built without NDEBUG, so unless
// the program says otherwise every absl::Mutex::Lock records the locks the
// thread holds in a process-wide graph (GraphCycles, behind one global spin
// lock) and searches it for a cycle: in this library an uncontended
// Lock/Unlock pair costs about 3.5x what it does without (130 against 35 ns),
// and every thread that locks anything serialises on that one spin lock.
// Release builds turn it off; debug and sanitizer builds keep it, so an
// inverted lock order still aborts there with both stacks.
//
// CPU-frequency calibration. absl::Mutex reads the cycle counter's
// frequency (CycleClock::Frequency) the first time a thread queues behind
// another waiter on a mutex (Enqueue, to re-read the thread's priority once a
// second), and it does so holding that mutex's internal spin bit. The first
// call calibrates: from /sys/devices/system/cpu/cpu0/tsc_freq_khz where the
// kernel provides it, else by sleeping 1, 2, 4... ms (up to 255 ms) until two
// measurements agree within 1%. Meanwhile every other thread that touches
// that mutex spins and sleeps. When that mutex was the safepoint lock, the
// whole VM stood still. Calibrating here, before any thread exists, makes
// the later calls a load of the cached value.
#include "base/sync_setup.h"

#include "absl/base/internal/cycleclock.h"
#include "absl/synchronization/mutex.h"

namespace minivm::base {

void InitSynchronization() {
  if constexpr (!kMutexDeadlockDetection) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  // The value is not needed; the call runs (once per process) the same
  // calibration that absl::Mutex would otherwise run lazily.
  (void)absl::base_internal::CycleClock::Frequency();
}

}  // namespace minivm::base
