// Stop-the-world safepoints with several mutator threads: threads allocate,
// link objects across threads and collect concurrently; blocked threads do
// not hold up a collection; RunAtSafepoint reaches every thread; threads
// attach and detach while collections run. Run under TSan.
#include "gc/safepoint.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "gc/generational_heap.h"
#include "gtest/gtest.h"
#include "tests/unit/gc/gc_test_util.h"

namespace minivm::gc::testing {
namespace {

class SafepointTest : public GcTest {
 protected:
  void SetUp() override {
    HeapOptions o = SmallHeapOptions();
    o.verify_heap = false;  // the verifier is exercised elsewhere; keep threads busy
    o.verbose_gc = getenv("GC_TEST_VERBOSE") != nullptr;
    MakeHeap(o);
  }

  // Runs `body` on n threads, each attached with its own roots; the main
  // thread waits inside a blocked region so it never holds up a safepoint.
  template <typename F>
  void RunThreads(int n, F body) {
    std::vector<std::thread> threads;
    {
      BlockedScope blocked(m());
      for (int i = 0; i < n; ++i) {
        threads.emplace_back([this, i, &body] {
          TestThread t;
          heap_->AttachMutator(&t.mutator);
          body(i, t);
          heap_->DetachMutator(&t.mutator);
        });
      }
      for (auto& t : threads) t.join();
    }
  }
};

TEST_F(SafepointTest, ThreadsAllocateAndLinkWhileCollecting) {
  constexpr int kThreads = 4;
  constexpr int kNodes = 30000;
  std::mutex mailbox_mu;  // TSan-visible: the system Abseil is not instrumented
  vm_.globals.assign(kThreads, Value::Null());  // mailbox: one slot per thread
  std::atomic<int> errors{0};
  RunThreads(kThreads, [&](int id, TestThread& t) {
    Mutator* mm = &t.mutator;
    t.roots.assign(2, Value::Null());  // [0] own list head, [1] scratch
    for (int i = 0; i < kNodes; ++i) {
      Object* p = NewPair(mm);
      ASSERT_NE(p, nullptr);
      p->fields()[0] = Value::Int(id * 1000000 + i);
      Store(mm, p, &p->fields()[1], t.roots[0]);
      t.roots[0] = Value::Ref(p);
      if (i % 500 == 0) {
        // Publish our head; link to another thread's published head through
        // a fresh pair that we keep in our scratch root.
        Object* link = NewPair(mm);
        std::lock_guard<std::mutex> lock(mailbox_mu);
        vm_.globals[id] = t.roots[0];
        Store(mm, link, &link->fields()[0], vm_.globals[(id + 1) % kThreads]);
        Store(mm, link, &link->fields()[1], t.roots[1]);
        t.roots[1] = Value::Ref(link);
      }
      if (i % 15000 == 0) heap_->CollectGarbage(mm, GcCause::kExplicit);
      for (int k = 0; k < 6; ++k) NewBytes(mm, 40);  // garbage
    }
    // Our own list is intact, in order.
    Object* p = t.roots[0].AsRef();
    for (int i = kNodes - 1; i >= 0; --i) {
      if (p == nullptr || p->fields()[0].AsInt() != id * 1000000 + i) {
        ++errors;
        return;
      }
      p = p->fields()[1].AsRef();
    }
    // Every link points at a pair of some thread's list.
    for (Object* l = t.roots[1].AsRef(); l != nullptr; l = l->fields()[1].AsRef()) {
      Value v = l->fields()[0];
      if (!v.IsNull() && v.AsRef()->klass != &kPairLayout) ++errors;
    }
  });
  EXPECT_EQ(errors.load(), 0);
  HeapStats s = heap_->Stats();
  EXPECT_GE(s.full_collections, static_cast<uint64_t>(kThreads * 2));
  EXPECT_GE(s.minor_collections, 1u);
  heap_->VerifyNow(m());
}

TEST_F(SafepointTest, BlockedThreadDoesNotHoldUpCollections) {
  std::atomic<bool> sleeper_in{false};
  std::atomic<bool> done{false};
  RunThreads(2, [&](int id, TestThread& t) {
    if (id == 0) {
      t.roots.push_back(Value::Ref(NewPair(&t.mutator)));
      {
        BlockedScope blocked(&t.mutator);
        sleeper_in = true;
        while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      // Our root was updated while we were blocked.
      EXPECT_TRUE(heap_->InOld(t.roots[0].AsRef()));
    } else {
      while (!sleeper_in) std::this_thread::yield();
      for (int i = 0; i < 5; ++i) heap_->CollectGarbage(&t.mutator, GcCause::kExplicit);
      done = true;
    }
  });
  EXPECT_EQ(heap_->Stats().full_collections, 5u);
}

TEST_F(SafepointTest, RunAtSafepointVisitsEveryMutator) {
  constexpr int kThreads = 3;
  std::atomic<int> attached{0};
  std::atomic<bool> stop{false};
  std::vector<Mutator*> seen;
  std::thread requester;
  RunThreads(kThreads + 1, [&](int id, TestThread& t) {
    if (id < kThreads) {
      ++attached;
      while (!stop) SafepointPoll(&t.mutator);  // a running thread at its poll sites
      return;
    }
    while (attached < kThreads) std::this_thread::yield();
    heap_->RunAtSafepoint(&t.mutator, [&](Mutator* mm) {
      seen.push_back(mm);
      mm->tlab.current_end = mm->tlab.end;  // what the agent API will re-arm
    });
    stop = true;
  });
  // The three pollers, the requester and the blocked main thread.
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads + 2));
}

TEST_F(SafepointTest, AttachAndDetachWhileCollectionsRun) {
  std::atomic<bool> stop{false};
  RunThreads(3, [&](int id, TestThread& t) {
    if (id == 0) {
      for (int i = 0; i < 50; ++i) heap_->CollectGarbage(&t.mutator, GcCause::kExplicit);
      stop = true;
      return;
    }
    while (!stop) {
      // A second mutator driven from this thread: this thread's own mutator
      // must be blocked meanwhile, or a safepoint would wait for it forever.
      BlockedScope blocked(&t.mutator);
      TestThread inner;
      heap_->AttachMutator(&inner.mutator);
      inner.roots.push_back(Value::Ref(NewPair(&inner.mutator)));
      for (int i = 0; i < 100; ++i) NewArray(&inner.mutator, 3);
      EXPECT_EQ(inner.roots[0].AsRef()->klass, &kPairLayout);
      heap_->DetachMutator(&inner.mutator);
    }
  });
  EXPECT_GE(heap_->Stats().full_collections, 50u);
}

TEST_F(SafepointTest, ConcurrentAllocationFailuresCollectOnceEach) {
  // Many threads exhausting eden at once: only one collects at a time, the
  // others wait and retry; nobody sees a spurious exhaustion.
  std::atomic<int> nulls{0};
  RunThreads(4, [&](int, TestThread& t) {
    for (int i = 0; i < 200000; ++i) {
      if (NewPair(&t.mutator) == nullptr) ++nulls;
    }
  });
  EXPECT_EQ(nulls.load(), 0);
  EXPECT_GE(heap_->Stats().minor_collections, 4u);
}

TEST_F(SafepointTest, NativeThreadDoesNotHoldUpCollectionsAndStatesNest) {
  // An agent callback runs native (gc/safepoint.h): collections proceed and
  // update its roots; a blocked wait inside it returns to native, not to
  // running; leaving native restores running.
  std::atomic<bool> native_in{false};
  std::atomic<bool> done{false};
  RunThreads(2, [&](int id, TestThread& t) {
    if (id == 0) {
      t.roots.push_back(Value::Ref(NewPair(&t.mutator)));
      const SafepointState outer = heap_->SetSafepointState(&t.mutator, SafepointState::kNative);
      EXPECT_EQ(outer, SafepointState::kRunning);
      native_in = true;
      while (!done) std::this_thread::yield();
      {
        BlockedScope blocked(&t.mutator);
        EXPECT_EQ(SafepointManager::StateOfSelf(&t.mutator), SafepointState::kBlocked);
      }
      EXPECT_EQ(SafepointManager::StateOfSelf(&t.mutator), SafepointState::kNative);
      heap_->SetSafepointState(&t.mutator, outer);
      EXPECT_EQ(SafepointManager::StateOfSelf(&t.mutator), SafepointState::kRunning);
      EXPECT_TRUE(heap_->InOld(t.roots[0].AsRef()));  // updated while native
    } else {
      while (!native_in) std::this_thread::yield();
      for (int i = 0; i < 3; ++i) heap_->CollectGarbage(&t.mutator, GcCause::kExplicit);
      done = true;
    }
  });
  EXPECT_EQ(heap_->Stats().full_collections, 3u);
}

TEST_F(SafepointTest, ACallbackBlockedWhenTheVmDiesNeverRunsOn) {
  // VM death waits for native threads (callbacks in flight) but not for
  // blocked ones (a callback waiting on a raw monitor): gc/safepoint.h,
  // point 6. When such a wait ends after the stop, the thread must not go
  // back to native, where its callback would run beside VMDeath (a TSan
  // report in the tools suite, 2026-11-27): it parks for good. In a child
  // process, since the parked thread never ends.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::atomic<int> step{0};
        TestThread t;
        std::thread callback([&] {
          heap_->AttachMutator(&t.mutator);
          heap_->SetSafepointState(&t.mutator, SafepointState::kNative);   // the callback
          heap_->SetSafepointState(&t.mutator, SafepointState::kBlocked);  // its wait
          step = 1;
          while (step != 2) std::this_thread::yield();
          heap_->SetSafepointState(&t.mutator, SafepointState::kNative);  // the wait ends
          std::_Exit(1);  // the callback ran on after the stop
        });
        while (step != 1) std::this_thread::yield();
        heap_->StopMutatorsForExit(m());  // does not wait for the blocked thread
        step = 2;
        while (SafepointManager::StateOfSelf(&t.mutator) != SafepointState::kStopped) {
          std::this_thread::yield();
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(SafepointTest, ExitStopByANonMutatorBelongsToItsThread) {
  // The VM's signal thread ends the VM as a non-mutator (null requester):
  // it may still collect (agents' VMDeath callbacks), while any other
  // non-mutator (an agent's own thread) gets nothing rather than a second
  // owner of the stopped world.
  const size_t head = MakeList(100);
  vm_.globals.push_back(roots()[head]);
  heap_->DetachMutator(m());
  main_.mutator.heap = nullptr;  // detached: TearDown must not detach again
  heap_->StopMutatorsForExit(nullptr);
  const uint64_t before = heap_->Stats().full_collections;
  std::thread other([&] { heap_->CollectGarbage(nullptr, GcCause::kExplicit); });
  other.join();
  EXPECT_EQ(heap_->Stats().full_collections, before);
  heap_->CollectGarbage(nullptr, GcCause::kExplicit);
  EXPECT_EQ(heap_->Stats().full_collections, before + 1);
  Object* p = vm_.globals[0].AsRef();
  for (int i = 0; i < 100; ++i) {
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(p->fields()[0].AsInt(), i);
    p = p->fields()[1].AsRef();
  }
}

}  // namespace
}  // namespace minivm::gc::testing
