// InitSynchronization (base/sync_setup.h): in Release builds an inverted lock
// order goes unreported, in debug and sanitizer builds Abseil still aborts
// on it; the call can be repeated and leaves the cycle clock calibrated.
// Each case runs in a child process (death-test machinery), since the
// lock-order mode and the calibration are process-wide and the other tests
// of this binary run without the set-up.
#include "base/sync_setup.h"

#include <cstdlib>

#include "absl/base/internal/cycleclock.h"
#include "base/sync.h"
#include "gtest/gtest.h"

namespace minivm::base {
namespace {

// a then b, later b then a: a cycle in the lock-order graph, though one
// thread alone cannot deadlock on it.
void InvertLockOrder() {
  Mutex a;
  Mutex b;
  {
    MutexLock la(&a);
    MutexLock lb(&b);
  }
  {
    MutexLock lb(&b);
    MutexLock la(&a);
  }
}

TEST(SyncSetupDeathTest, InvertedLockOrderReportedOnlyWhereDetectionIsKept) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if constexpr (kMutexDeadlockDetection) {
    EXPECT_DEATH(
        {
          InitSynchronization();
          InvertLockOrder();
        },
        "Potential Mutex deadlock");
  } else {
    // Exit code 0 and nothing at all on stderr: neither an abort nor a report.
    EXPECT_EXIT(
        {
          InitSynchronization();
          InvertLockOrder();
          std::exit(0);
        },
        ::testing::ExitedWithCode(0), "^$");
  }
}

TEST(SyncSetupDeathTest, RepeatableAndLeavesTheClockCalibrated) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        InitSynchronization();
        const double hz = absl::base_internal::CycleClock::Frequency();
        InitSynchronization();
        // Calibrated once: later reads return the cached value.
        const bool ok = hz > 0 && absl::base_internal::CycleClock::Frequency() == hz;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "^$");
}

}  // namespace
}  // namespace minivm::base
