// Weak slots and the events reported to the observer after each pause.
#include "gc/weak_table.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "gc/generational_heap.h"
#include "gtest/gtest.h"
#include "tests/unit/gc/gc_test_util.h"

namespace minivm::gc::testing {
namespace {

struct RecordingObserver : WeakObserver {
  std::vector<WeakEvent> events;
  std::vector<size_t> batch_sizes;
  void OnWeakEventsFound(absl::Span<const WeakEvent> batch) override {
    events.insert(events.end(), batch.begin(), batch.end());
    batch_sizes.push_back(batch.size());
  }
  void DeliverFoundWeakEvents() override {}
};

class WeakTableTest : public GcTest {
 protected:
  void SetUp() override {
    HeapOptions o = SmallHeapOptions();
    o.max_tenuring_threshold = 1;
    MakeHeap(o);
    heap_->SetWeakObserver(&observer_);
  }
  RecordingObserver observer_;
};

TEST_F(WeakTableTest, SlotsFollowMovesAndClearOnDeath) {
  WeakTable& w = heap_->weak_table();
  const size_t live = Root(NewPair(m()));
  const WeakSlotId s_live = w.Create(R(live), 100);
  const WeakSlotId s_dead = w.Create(NewPair(m()), 200);
  EXPECT_EQ(w.Get(s_live), R(live));
  EXPECT_EQ(w.size(), 2u);

  Minor();
  EXPECT_EQ(w.Get(s_live), R(live));
  EXPECT_EQ(w.Get(s_dead), nullptr);
  ASSERT_EQ(observer_.events.size(), 2u);
  EXPECT_EQ(observer_.events[0].kind, WeakEventKind::kMoved);
  EXPECT_EQ(observer_.events[0].cookie, 100u);
  EXPECT_EQ(observer_.events[0].slot, s_live);
  EXPECT_EQ(observer_.events[0].new_address, R(live));
  EXPECT_EQ(observer_.events[1].kind, WeakEventKind::kDied);
  EXPECT_EQ(observer_.events[1].cookie, 200u);
  EXPECT_EQ(observer_.events[1].new_address, nullptr);

  observer_.events.clear();
  Minor();  // promoted (threshold 1)
  ASSERT_EQ(observer_.events.size(), 1u);
  EXPECT_EQ(observer_.events[0].kind, WeakEventKind::kPromoted);
  EXPECT_TRUE(heap_->InOld(w.Get(s_live)));

  observer_.events.clear();
  Minor();  // old objects report nothing in a minor collection
  Full();   // nor when they survive a full one
  EXPECT_TRUE(observer_.events.empty());

  roots()[live] = Value::Null();
  Full();
  ASSERT_EQ(observer_.events.size(), 1u);
  EXPECT_EQ(observer_.events[0].kind, WeakEventKind::kDied);
  EXPECT_EQ(observer_.events[0].cookie, 100u);
  EXPECT_EQ(w.Get(s_live), nullptr);
  w.Delete(s_live);
  w.Delete(s_dead);
  EXPECT_EQ(w.size(), 0u);
}

TEST_F(WeakTableTest, EventsComeInSlotOrderOneBatchPerCollection) {
  WeakTable& w = heap_->weak_table();
  std::vector<WeakSlotId> ids;
  for (int i = 0; i < 100; ++i) {
    Object* p = NewPair(m());
    if (i % 2 == 0) Root(p);
    ids.push_back(w.Create(p, i));
  }
  Minor();
  ASSERT_EQ(observer_.batch_sizes, std::vector<size_t>{100});
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(observer_.events[i].cookie, static_cast<uint64_t>(i));
    EXPECT_EQ(observer_.events[i].kind, i % 2 == 0 ? WeakEventKind::kMoved : WeakEventKind::kDied);
  }
}

TEST_F(WeakTableTest, FullCollectionReportsYoungObjectsAsPromoted) {
  WeakTable& w = heap_->weak_table();
  const size_t a = Root(NewPair(m()));
  w.Create(R(a), 1);
  w.Create(NewPair(m()), 2);
  Full();
  ASSERT_EQ(observer_.events.size(), 2u);
  EXPECT_EQ(observer_.events[0].kind, WeakEventKind::kPromoted);
  EXPECT_EQ(observer_.events[0].new_address, R(a));
  EXPECT_EQ(observer_.events[1].kind, WeakEventKind::kDied);
}

TEST_F(WeakTableTest, LargeObjectsDieInFullCollections) {
  WeakTable& w = heap_->weak_table();
  const WeakSlotId s = w.Create(NewArray(m(), 5000), 7);
  Minor();
  EXPECT_NE(w.Get(s), nullptr);
  EXPECT_TRUE(observer_.events.empty());
  Full();
  EXPECT_EQ(w.Get(s), nullptr);
  ASSERT_EQ(observer_.events.size(), 1u);
  EXPECT_EQ(observer_.events[0].kind, WeakEventKind::kDied);
}

// .young, on the table alone: a kYoung pass visits the slots created since
// the last one and those that stayed young, in slot order; a slot whose
// object left the young generation (promoted, dead, never young) or that
// was deleted is not visited again, and a reused id is visited once.
TEST(WeakTableYoungTest, YoungPassesVisitOnlyWhatMayBeYoung) {
  WeakTable w;
  Object objs[6];
  Object moved;
  Object promoted;
  auto obj = [&](int i) { return &objs[i]; };
  std::vector<WeakSlotId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(w.Create(obj(i), 100 + i));
  // 0 stays young, 1 is promoted, 2 dies, 3 is old already, 4 is deleted
  // before the pass, 5 stays young.
  w.Delete(ids[4]);
  std::vector<Object*> visited;
  auto first = [&](Object* o, WeakTable::Fate* f) {
    visited.push_back(o);
    if (o == obj(0) || o == obj(5)) *f = {WeakEventKind::kMoved, &moved};
    if (o == obj(1)) *f = {WeakEventKind::kPromoted, &promoted};
    if (o == obj(2)) *f = {WeakEventKind::kDied, nullptr};
    return o != obj(3);
  };
  std::vector<WeakEvent> events;
  w.Process(WeakTable::Scope::kYoung, first, &events);
  EXPECT_EQ(visited, (std::vector<Object*>{obj(0), obj(1), obj(2), obj(3), obj(5)}));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].slot, ids[0]);
  EXPECT_EQ(events[1].slot, ids[1]);
  EXPECT_EQ(events[2].slot, ids[2]);
  EXPECT_EQ(events[3].slot, ids[5]);

  // The deleted id is reused: it is listed once, whatever its history.
  const WeakSlotId reused = w.Create(obj(4), 200);
  EXPECT_EQ(reused, ids[4]);
  visited.clear();
  events.clear();
  w.Process(WeakTable::Scope::kYoung,
            [&](Object* o, WeakTable::Fate* f) {
              visited.push_back(o);
              *f = {WeakEventKind::kMoved, o};
              return true;
            },
            &events);
  // Only the two that stayed young (both now at `moved`) and the new one.
  EXPECT_EQ(visited, (std::vector<Object*>{&moved, obj(4), &moved}));

  // A kAll pass still visits every slot holding an object.
  visited.clear();
  w.Process(WeakTable::Scope::kAll,
            [&](Object* o, WeakTable::Fate*) {
              visited.push_back(o);
              return false;
            },
            nullptr);
  EXPECT_EQ(visited, (std::vector<Object*>{&moved, &promoted, obj(3), obj(4), &moved}));
}

// An observer that allocates (and so may collect) from inside the callback:
// the nested collection's events reach it on the same thread, re-entering
// it (weak_table.h, .delivery: ordering and nesting rules are the
// observer's), in collection order, with no deadlock.
struct AllocatingObserver : WeakObserver {
  Mutator* m = nullptr;
  WeakTable* w = nullptr;
  std::vector<uint64_t> cookies;
  int depth = 0;
  int max_depth = 0;
  std::vector<WeakEvent> found;  // kept inside the pause, delivered after
  void OnWeakEventsFound(absl::Span<const WeakEvent> batch) override {
    found.insert(found.end(), batch.begin(), batch.end());
  }
  void DeliverFoundWeakEvents() override {
    std::vector<WeakEvent> batch;
    batch.swap(found);
    ++depth;
    max_depth = std::max(max_depth, depth);
    for (const WeakEvent& e : batch) cookies.push_back(e.cookie);
    if (cookies.size() < 3) {
      // Allocate garbage tracked by a weak slot and force a collection.
      w->Create(NewPair(m), 1000 + cookies.size());
      m->heap->CollectGarbage(m, GcCause::kExplicit);
    }
    --depth;
  }
};

TEST_F(WeakTableTest, ObserverMayAllocateAndCollect) {
  AllocatingObserver obs;
  obs.m = m();
  obs.w = &heap_->weak_table();
  heap_->SetWeakObserver(&obs);
  obs.w->Create(NewPair(m()), 1);
  Full();
  EXPECT_EQ(obs.cookies, (std::vector<uint64_t>{1, 1001, 1002}));
  EXPECT_EQ(obs.max_depth, 3) << "each collection delivered on the thread that ran it";
  heap_->SetWeakObserver(nullptr);
}

TEST_F(WeakTableTest, NoObserverNoEventsButSlotsStillUpdated) {
  heap_->SetWeakObserver(nullptr);
  WeakTable& w = heap_->weak_table();
  const size_t a = Root(NewPair(m()));
  const WeakSlotId s = w.Create(R(a), 1);
  Minor();
  EXPECT_EQ(w.Get(s), R(a));
  EXPECT_TRUE(observer_.events.empty());
}

// Weak slots used from several threads while their collections run: every
// slot keeps following its thread's rooted object (TSan-clean).
TEST_F(WeakTableTest, SlotsAreUsableFromManyThreads) {
  WeakTable& w = heap_->weak_table();
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  {
    BlockedScope blocked(m());
    for (int id = 0; id < 3; ++id) {
      threads.emplace_back([&, id] {
        TestThread t;
        heap_->AttachMutator(&t.mutator);
        for (int round = 0; round < 200; ++round) {
          t.roots.assign(1, Value::Ref(NewPair(&t.mutator)));
          const WeakSlotId live = w.Create(t.roots[0].AsRef(), id);
          const WeakSlotId dead = w.Create(NewPair(&t.mutator), id);
          for (int i = 0; i < 2000; ++i) NewBytes(&t.mutator, 100);
          if (round % 50 == 0) heap_->CollectGarbage(&t.mutator, GcCause::kExplicit);
          if (w.Get(live) != t.roots[0].AsRef()) ++errors;
          (void)w.Get(dead);  // null or not, depending on whether a GC ran
          w.Delete(live);
          w.Delete(dead);
        }
        heap_->DetachMutator(&t.mutator);
      });
    }
    for (auto& t : threads) t.join();
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(w.size(), 0u);
  EXPECT_GE(heap_->Stats().minor_collections, 1u);
}

TEST(WeakTableDeathTest, DeletingTwiceFails) {
  WeakTable w;
  const WeakSlotId s = w.Create(nullptr, 0);
  w.Delete(s);
  EXPECT_DEATH(w.Delete(s), "deleted twice");
}

}  // namespace
}  // namespace minivm::gc::testing
