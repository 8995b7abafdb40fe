// Raw monitors (agent_api/raw_monitors.h) as plain functions, on threads
// that are not VM threads (as an agent's own pthreads are). Waits are
// decided by what the threads did, never by timing: a thread that must
// block is known to block because the monitor is owned; a waiter is known
// to be waiting once the notifier could enter the monitor it released.
#include "agent_api/raw_monitors.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/agent_api/agent_test_util.h"

namespace minivm::agent::testing {
namespace {

class RawMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(CreateRawMonitorImpl("test", &m_), VMTI_ERROR_NONE); }
  void TearDown() override {
    // Destroyed by the test already, or destroyed here (never owned by
    // another thread at this point).
    const vmtiError err = DestroyRawMonitorImpl(m_);
    EXPECT_TRUE(err == VMTI_ERROR_NONE || err == VMTI_ERROR_INVALID_MONITOR) << err;
  }
  vmtiRawMonitorID m_ = nullptr;
};

TEST_F(RawMonitorTest, CreateChecksItsArgumentsAndHandlesAreNeverReused) {
  vmtiRawMonitorID a = nullptr;
  EXPECT_EQ(CreateRawMonitorImpl(nullptr, &a), VMTI_ERROR_NULL_POINTER);
  EXPECT_EQ(CreateRawMonitorImpl("a", nullptr), VMTI_ERROR_NULL_POINTER);
  ASSERT_EQ(CreateRawMonitorImpl("a", &a), VMTI_ERROR_NONE);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, m_);
  ASSERT_EQ(DestroyRawMonitorImpl(a), VMTI_ERROR_NONE);
  vmtiRawMonitorID b = nullptr;
  ASSERT_EQ(CreateRawMonitorImpl("b", &b), VMTI_ERROR_NONE);
  EXPECT_NE(b, a) << "a destroyed handle must stay invalid";
  EXPECT_EQ(RawMonitorEnterImpl(a), VMTI_ERROR_INVALID_MONITOR);
  ASSERT_EQ(DestroyRawMonitorImpl(b), VMTI_ERROR_NONE);
}

TEST_F(RawMonitorTest, ForgedNullAndDestroyedHandlesAreInvalid) {
  vmtiRawMonitorID dead = nullptr;
  ASSERT_EQ(CreateRawMonitorImpl("dead", &dead), VMTI_ERROR_NONE);
  ASSERT_EQ(DestroyRawMonitorImpl(dead), VMTI_ERROR_NONE);
  int on_stack = 0;
  const vmtiRawMonitorID bad[] = {nullptr, dead, reinterpret_cast<vmtiRawMonitorID>(&on_stack),
                                  reinterpret_cast<vmtiRawMonitorID>(~uintptr_t{0})};
  for (vmtiRawMonitorID h : bad) {
    EXPECT_EQ(RawMonitorEnterImpl(h), VMTI_ERROR_INVALID_MONITOR);
    EXPECT_EQ(RawMonitorExitImpl(h), VMTI_ERROR_INVALID_MONITOR);
    EXPECT_EQ(RawMonitorWaitImpl(h, 1), VMTI_ERROR_INVALID_MONITOR);
    EXPECT_EQ(RawMonitorNotifyImpl(h, false), VMTI_ERROR_INVALID_MONITOR);
    EXPECT_EQ(RawMonitorNotifyImpl(h, true), VMTI_ERROR_INVALID_MONITOR);
    EXPECT_EQ(DestroyRawMonitorImpl(h), VMTI_ERROR_INVALID_MONITOR);
  }
}

TEST_F(RawMonitorTest, ReentrantAndOwnedByTheThread) {
  ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
  // Another thread owns nothing here.
  std::thread([this] {
    EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NOT_MONITOR_OWNER);
    EXPECT_EQ(RawMonitorNotifyImpl(m_, false), VMTI_ERROR_NOT_MONITOR_OWNER);
    EXPECT_EQ(RawMonitorNotifyImpl(m_, true), VMTI_ERROR_NOT_MONITOR_OWNER);
    EXPECT_EQ(RawMonitorWaitImpl(m_, 1), VMTI_ERROR_NOT_MONITOR_OWNER);
    EXPECT_EQ(DestroyRawMonitorImpl(m_), VMTI_ERROR_NOT_MONITOR_OWNER);
  }).join();
  // Three levels, three exits; a fourth is not the owner's any more.
  ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NOT_MONITOR_OWNER);
  EXPECT_EQ(RawMonitorNotifyImpl(m_, false), VMTI_ERROR_NOT_MONITOR_OWNER);
  EXPECT_EQ(RawMonitorWaitImpl(m_, 1), VMTI_ERROR_NOT_MONITOR_OWNER);
}

TEST_F(RawMonitorTest, EnterBlocksUntilTheOwnerHasExitedEveryLevel) {
  ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
  std::atomic<int> released{0};  // levels this thread has exited
  std::atomic<int> seen_at_entry{-1};
  std::thread other([&] {
    EXPECT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
    seen_at_entry = released.load();
    EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  });
  released = 1;
  ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  released = 2;
  ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  other.join();
  EXPECT_EQ(seen_at_entry, 2) << "entered while the owner still held a level";
}

TEST_F(RawMonitorTest, MutualExclusionUnderContention) {
  constexpr int kThreads = 4, kRounds = 2000;
  int counter = 0;  // guarded by m_ only
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
        const int v = counter;
        std::this_thread::yield();
        counter = v + 1;
        ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, kThreads * kRounds);
}

TEST_F(RawMonitorTest, WaitReleasesEveryLevelAndRestoresThemAfterNotify) {
  std::atomic<bool> waiting{false};
  std::atomic<vmtiError> wait_result{VMTI_ERROR_INTERNAL};
  std::thread waiter([&] {
    ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
    ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
    waiting = true;  // set while owning: the notifier enters only after Wait
                     // released it
    wait_result = RawMonitorWaitImpl(m_, 0);
    // Both levels are back: two exits succeed, a third does not.
    EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
    EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
    EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NOT_MONITOR_OWNER);
  });
  // Once `waiting` is set and the monitor can be entered, the waiter is in
  // the wait set (it released the monitor inside Wait).
  for (;;) {
    ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
    if (waiting) break;
    ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
    std::this_thread::yield();
  }
  ASSERT_EQ(RawMonitorNotifyImpl(m_, false), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  waiter.join();
  EXPECT_EQ(wait_result, VMTI_ERROR_NONE);
}

// Starts `n` threads that each enter and wait (no time-out), and returns
// once all of them are in the wait set, with the monitor owned by the caller.
class WaitersTest : public RawMonitorTest {
 protected:
  void StartWaiters(int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this] {
        ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
        ++entered_;
        const vmtiError err = RawMonitorWaitImpl(m_, 0);
        {
          std::lock_guard<std::mutex> lock(results_mu_);
          results_.push_back(err);
        }
        ++woken_;
        if (err == VMTI_ERROR_NONE) {
          EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
        }
      });
    }
    // Every waiter incremented `entered_` while owning the monitor and
    // released it only by waiting: once the count is n and we own it, all
    // n are waiting.
    for (;;) {
      ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
      if (entered_ == n) return;
      ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
      std::this_thread::yield();
    }
  }
  void JoinAll() {
    for (std::thread& t : threads_) t.join();
  }
  std::vector<std::thread> threads_;
  std::atomic<int> entered_{0};
  std::atomic<int> woken_{0};
  std::mutex results_mu_;  // not m_: a destroyed monitor is not owned again
  std::vector<vmtiError> results_;
};

TEST_F(WaitersTest, NotifyWakesOneWaiterNotifyAllEveryWaiter) {
  StartWaiters(3);
  ASSERT_EQ(RawMonitorNotifyImpl(m_, false), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  // Exactly one returns: wait until it has, then check the others have not.
  while (woken_ < 1) std::this_thread::yield();
  ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
  EXPECT_EQ(woken_, 1) << "Notify woke more than one waiter";
  ASSERT_EQ(RawMonitorNotifyImpl(m_, true), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  JoinAll();
  EXPECT_EQ(woken_, 3);
  EXPECT_EQ(results_, std::vector<vmtiError>(3, VMTI_ERROR_NONE));
}

TEST_F(WaitersTest, NotifyWithNoWaitersIsNotRemembered) {
  ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorNotifyImpl(m_, false), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorNotifyImpl(m_, true), VMTI_ERROR_NONE);
  // A later timed wait times out (it was not pre-notified), with the
  // monitor owned again.
  EXPECT_EQ(RawMonitorWaitImpl(m_, 1), VMTI_ERROR_NONE);
  EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NOT_MONITOR_OWNER);
}

TEST_F(WaitersTest, DestroyWakesWaitersWithInvalidMonitor) {
  StartWaiters(2);
  // Destroying a monitor the caller owns releases and destroys it (JVMTI).
  ASSERT_EQ(DestroyRawMonitorImpl(m_), VMTI_ERROR_NONE);
  JoinAll();
  EXPECT_EQ(results_, std::vector<vmtiError>(2, VMTI_ERROR_INVALID_MONITOR));
  EXPECT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_INVALID_MONITOR);
}

TEST_F(RawMonitorTest, DestroyWakesThreadsBlockedInEnter) {
  ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
  std::atomic<vmtiError> result{VMTI_ERROR_INTERNAL};
  std::atomic<bool> started{false};
  std::thread blocked([&] {
    started = true;
    result = RawMonitorEnterImpl(m_);  // blocks: the test owns the monitor
  });
  while (!started) std::this_thread::yield();
  // Whether `blocked` is already waiting or not yet in Enter, it must see
  // INVALID_MONITOR: destroyed either under it or before it looked.
  ASSERT_EQ(DestroyRawMonitorImpl(m_), VMTI_ERROR_NONE);
  blocked.join();
  EXPECT_EQ(result, VMTI_ERROR_INVALID_MONITOR);
}

TEST_F(RawMonitorTest, DestroyOfAFreeMonitorAndOfADestroyedOne) {
  ASSERT_EQ(DestroyRawMonitorImpl(m_), VMTI_ERROR_NONE);
  EXPECT_EQ(DestroyRawMonitorImpl(m_), VMTI_ERROR_INVALID_MONITOR);
}

TEST_F(RawMonitorTest, HugeTimeoutsDoNotOverflow) {
  // A waiter with the largest time-out is woken by a notification, not
  // returned at once by an overflowed deadline.
  std::atomic<bool> waiting{false};
  std::atomic<bool> returned{false};
  std::atomic<vmtiError> result{VMTI_ERROR_INTERNAL};
  std::thread waiter([&] {
    ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
    waiting = true;
    result = RawMonitorWaitImpl(m_, INT64_MAX);
    returned = true;
    EXPECT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  });
  for (;;) {
    ASSERT_EQ(RawMonitorEnterImpl(m_), VMTI_ERROR_NONE);
    if (waiting) break;
    ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
    std::this_thread::yield();
  }
  // The waiter released the monitor by waiting; it has not returned.
  EXPECT_FALSE(returned) << "a wait of INT64_MAX ms returned without a notification";
  ASSERT_EQ(RawMonitorNotifyImpl(m_, false), VMTI_ERROR_NONE);
  ASSERT_EQ(RawMonitorExitImpl(m_), VMTI_ERROR_NONE);
  waiter.join();
  EXPECT_EQ(result, VMTI_ERROR_NONE);
}

// Design point 4: once VM death begins, an agent thread's RawMonitorWait
// returns VMTI_ERROR_INTERRUPT with the monitor owned again, whether it was
// waiting already or waits later; waits on other threads are not
// interrupted. Needs a VM: agent threads are VM threads.
class InterruptTest : public ToolTest {
 protected:
  static inline vmtiRawMonitorID monitor_ = nullptr;
  static inline std::atomic<vmtiError> wait_result_{VMTI_ERROR_INTERNAL};
  static inline std::atomic<vmtiError> exit_result_{VMTI_ERROR_INTERNAL};

  static void WaitForever(vmtiEnv* env, void*) {
    EXPECT_EQ(env->RawMonitorEnter(monitor_), VMTI_ERROR_NONE);
    wait_result_ = env->RawMonitorWait(monitor_, 0);
    exit_result_ = env->RawMonitorExit(monitor_);
  }
};

TEST_F(InterruptTest, VmDeathInterruptsAgentThreadWaitsOnly) {
  vmtiEnv* env = NewEnv();
  ASSERT_EQ(env->CreateRawMonitor("interrupt", &monitor_), VMTI_ERROR_NONE);
  vmtiEventCallbacks cb = RecordingCallbacks();
  cb.VMInit = [](vmtiEnv* env, vmtiThread) {
    EXPECT_EQ(env->RunAgentThread("waiter", &WaitForever, nullptr, nullptr), VMTI_ERROR_NONE);
  };
  ASSERT_EQ(env->SetEventCallbacks(&cb, sizeof cb), VMTI_ERROR_NONE);
  ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_VM_INIT, nullptr),
            VMTI_ERROR_NONE);
  // The VM's destructor (inside Run) waits for the agent thread to finish:
  // without the interrupt this would never return.
  ASSERT_EQ(Run(AllocatingProgram(1, false)), 0) << err_;
  EXPECT_EQ(wait_result_, VMTI_ERROR_INTERRUPT);
  EXPECT_EQ(exit_result_, VMTI_ERROR_NONE) << "the monitor is owned again after the interrupt";

  // This thread is no agent thread: its timed wait just times out.
  ASSERT_EQ(RawMonitorEnterImpl(monitor_), VMTI_ERROR_NONE);
  EXPECT_EQ(RawMonitorWaitImpl(monitor_, 1), VMTI_ERROR_NONE);
  EXPECT_EQ(RawMonitorExitImpl(monitor_), VMTI_ERROR_NONE);
  EXPECT_EQ(DestroyRawMonitorImpl(monitor_), VMTI_ERROR_NONE);
}

}  // namespace
}  // namespace minivm::agent::testing
