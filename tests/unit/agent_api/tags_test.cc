// TagMap (agent_api/tags.h) on a real heap: weak slots, moves, promotions
// and deaths are the GC's own.
#include "agent_api/tags.h"

#include <vector>

#include "gc/weak_table.h"
#include "gtest/gtest.h"
#include "tests/unit/gc/gc_test_util.h"

namespace minivm::agent::testing {
namespace {

using gc::Object;
using gc::Value;
using gc::WeakEvent;
using gc::WeakEventKind;

// Keeps what the GC reported, as ToolInterface::OnWeakEventsFound receives it.
struct EventLog : gc::WeakObserver {
  std::vector<WeakEvent> events;
  void OnWeakEventsFound(absl::Span<const WeakEvent> batch) override {
    events.insert(events.end(), batch.begin(), batch.end());
  }
  void DeliverFoundWeakEvents() override {}
};

class TagMapTest : public gc::testing::GcTest {
 protected:
  static constexpr int kEnv = 3;
  void SetUp() override {
    gc::HeapOptions o = SmallHeapOptions();
    o.max_tenuring_threshold = 1;  // promoted by the second minor collection
    MakeHeap(o);
    heap_->SetWeakObserver(&log_);
  }
  gc::WeakTable& table() { return heap_->weak_table(); }
  uint64_t epoch() { return heap_->CollectionCount(); }
  int64_t Get(Object* o) { return tags_.Get(*heap_, o); }
  void Set(Object* o, int64_t tag) { tags_.Set(*heap_, kEnv, o, tag); }
  // Handles one reported event as ToolInterface does (Begin, then End when
  // Begin says so). Returns the tag posted, or nullopt (dropped or parked);
  // `next` gets whatever parked event End hands over.
  std::optional<int64_t> Handle(const WeakEvent& e, std::optional<WeakEvent>* next = nullptr) {
    int64_t tag = 0;
    const TagMap::Action a = tags_.Begin(e, table(), &tag);
    if (a == TagMap::Action::kParked) return std::nullopt;
    std::optional<WeakEvent> n = tags_.End(e);
    if (next != nullptr) *next = n;
    return a == TagMap::Action::kPost ? std::optional<int64_t>(tag) : std::nullopt;
  }
  std::vector<WeakEvent> EventsOf(WeakEventKind kind) {
    std::vector<WeakEvent> out;
    for (const WeakEvent& e : log_.events) {
      if (e.kind == kind && e.cookie != 0) out.push_back(e);
    }
    return out;
  }
  // The reports about tag records (cookie != 0), of one kind.
  std::vector<uint64_t> CookiesOf(WeakEventKind kind) {
    std::vector<uint64_t> out;
    for (const WeakEvent& e : log_.events) {
      if (e.kind == kind && e.cookie != 0) out.push_back(e.cookie);
    }
    return out;
  }

  TagMap tags_;
  EventLog log_;
};

TEST(TagCookieTest, RoundTripsEnvironmentAndRecord) {
  for (int env : {0, 1, 7, (1 << 24) - 2}) {
    for (uint64_t record : {uint64_t{0}, uint64_t{1}, uint64_t{123456}, (uint64_t{1} << 40) - 1}) {
      const uint64_t c = TagCookie(env, record);
      EXPECT_NE(c, 0u) << "0 is the cookie of a plain weak reference";
      EXPECT_EQ(CookieEnv(c), env);
      EXPECT_EQ(CookieRecord(c), record);
    }
  }
  // A plain weak reference's cookie names no environment.
  EXPECT_EQ(CookieEnv(0), -1);
  EXPECT_EQ(CookieRecord(0), 0u);
}

TEST_F(TagMapTest, SetGetAndUntaggedObjects) {
  const size_t a = Root(gc::testing::NewPair(m()));
  const size_t b = Root(gc::testing::NewPair(m()));
  EXPECT_EQ(Get(R(a)), 0);
  Set(R(a), 42);
  EXPECT_EQ(Get(R(a)), 42);
  EXPECT_EQ(Get(R(b)), 0);
  Set(R(a), -7);  // re-tagging replaces the tag, keeps one slot
  EXPECT_EQ(Get(R(a)), -7);
  EXPECT_EQ(table().size(), 1u);
  // The slot's cookie names this environment and the record.
  EXPECT_EQ(CookieEnv(table().Cookie(0)), kEnv);
}

TEST_F(TagMapTest, TagZeroRemovesAndFreesTheSlot) {
  const size_t a = Root(gc::testing::NewPair(m()));
  Set(R(a), 5);
  EXPECT_EQ(table().size(), 1u);
  Set(R(a), 0);
  EXPECT_EQ(Get(R(a)), 0);
  EXPECT_EQ(table().size(), 0u);
  EXPECT_TRUE(tags_.Empty()) << "no event was reported: the record is free at once";
  Set(R(a), 0);  // removing an absent tag is a no-op
  EXPECT_EQ(table().size(), 0u);
  Set(R(a), 6);
  EXPECT_EQ(Get(R(a)), 6);
  EXPECT_EQ(table().size(), 1u);
}

// statmemprof's "promotion reported for the wrong object": a promotion is
// reported, its tag cleared before the event is handled, and the record
// must not be reused by the next tag while the event is still to come.
TEST_F(TagMapTest, AClearedRecordIsNotReusedWhileItsEventIsQueued) {
  const size_t a = Root(gc::testing::NewPair(m()));
  Set(R(a), 1);
  Minor();
  Minor();  // promoted: the event is now "queued"
  const std::vector<WeakEvent> promoted = EventsOf(WeakEventKind::kPromoted);
  ASSERT_EQ(promoted.size(), 1u);
  Set(R(a), 0);  // cleared before delivery
  EXPECT_FALSE(tags_.Empty()) << "the record waits for its queued event";
  const size_t b = Root(gc::testing::NewPair(m()));
  Set(R(b), 2);  // must get another record
  EXPECT_NE(CookieRecord(table().Cookie(0)), CookieRecord(promoted[0].cookie))
      << "the young object got the record a promotion is still queued for";
  EXPECT_EQ(Handle(promoted[0]), std::nullopt) << "a cleared tag's event is dropped";
  EXPECT_EQ(Get(R(b)), 2);
  Set(R(b), 0);
  EXPECT_TRUE(tags_.Empty()) << "every record free once its events are handled";
}

// A tag changed after the collection and before delivery: the event carries
// the tag the object has when it is delivered.
TEST_F(TagMapTest, AnEventCarriesTheTagAtDelivery) {
  const size_t a = Root(gc::testing::NewPair(m()));
  Set(R(a), 1);
  Minor();
  Minor();
  Set(R(a), 99);
  const std::vector<WeakEvent> promoted = EventsOf(WeakEventKind::kPromoted);
  ASSERT_EQ(promoted.size(), 1u);
  EXPECT_EQ(Handle(promoted[0]), 99);
}

// Events of one object handled out of report order (a free reaching the
// map while its promotion is still with another thread): the free is
// parked and handed over when the promotion ends, never posted first.
TEST_F(TagMapTest, ALaterEventWaitsForTheEarlierOne) {
  const size_t a = Root(gc::testing::NewPair(m()));
  Set(R(a), 7);
  Minor();
  Minor();  // promoted (seq 0)
  roots()[a] = Value::Null();
  Full();  // died (seq 1)
  const std::vector<WeakEvent> promoted = EventsOf(WeakEventKind::kPromoted);
  const std::vector<WeakEvent> died = EventsOf(WeakEventKind::kDied);
  ASSERT_EQ(promoted.size(), 1u);
  ASSERT_EQ(died.size(), 1u);
  EXPECT_EQ(promoted[0].seq, 0u);
  EXPECT_EQ(died[0].seq, 1u);
  int64_t tag = 0;
  ASSERT_EQ(tags_.Begin(promoted[0], table(), &tag), TagMap::Action::kPost);  // in its callback
  EXPECT_EQ(tag, 7);
  EXPECT_EQ(tags_.Begin(died[0], table(), &tag), TagMap::Action::kParked);
  std::optional<WeakEvent> next = tags_.End(promoted[0]);
  ASSERT_TRUE(next.has_value()) << "the parked free is handed to the thread ending the promotion";
  EXPECT_EQ(next->kind, WeakEventKind::kDied);
  EXPECT_EQ(next->cookie, died[0].cookie);
  EXPECT_EQ(Handle(*next), 7);
  EXPECT_TRUE(tags_.Empty());
}

TEST_F(TagMapTest, ClearAllDropsQueuedEventsAndEmptiesOnceHandled) {
  std::vector<size_t> roots;
  for (int i = 0; i < 10; ++i) {
    roots.push_back(Root(gc::testing::NewPair(m())));
    Set(R(roots.back()), 100 + i);
  }
  Minor();
  Minor();
  const std::vector<WeakEvent> promoted = EventsOf(WeakEventKind::kPromoted);
  ASSERT_EQ(promoted.size(), 10u);
  tags_.ClearAll(table());
  EXPECT_EQ(table().size(), 0u);
  EXPECT_FALSE(tags_.Empty());
  for (const WeakEvent& e : promoted) EXPECT_EQ(Handle(e), std::nullopt);
  EXPECT_TRUE(tags_.Empty());
  tags_.Release();
  EXPECT_EQ(Get(R(roots[0])), 0);
}

TEST_F(TagMapTest, LookupsFollowObjectsAcrossMoves) {
  std::vector<size_t> roots;
  for (int i = 0; i < 50; ++i) {
    roots.push_back(Root(gc::testing::NewPair(m())));
    Set(R(roots.back()), 1000 + i);
  }
  const Object* before = R(roots[0]);
  Minor();  // every survivor is copied
  ASSERT_NE(R(roots[0]), before) << "the collection did not move the object";
  for (int i = 0; i < 50; ++i) EXPECT_EQ(Get(R(roots[i])), 1000 + i) << i;
  Minor();  // promoted: moved again
  for (int i = 0; i < 50; ++i) EXPECT_EQ(Get(R(roots[i])), 1000 + i) << i;
  Full();
  for (int i = 0; i < 50; ++i) EXPECT_EQ(Get(R(roots[i])), 1000 + i) << i;
  // Setting after a move finds the existing record, not a second slot.
  Set(R(roots[0]), 1);
  EXPECT_EQ(Get(R(roots[0])), 1);
  EXPECT_EQ(table().size(), 50u);
}

TEST_F(TagMapTest, AStaleIndexIsNeverUsedAtTheNewEpoch) {
  const size_t a = Root(gc::testing::NewPair(m()));
  Set(R(a), 9);
  Object* old_address = R(a);
  Minor();
  // The old address is not a tagged object any more (the index was rebuilt
  // from the weak slots, not carried over).
  EXPECT_EQ(Get(old_address), 0);
  EXPECT_EQ(Get(R(a)), 9);
}

TEST_F(TagMapTest, PromotionIsReportedOncePerRecord) {
  const size_t a = Root(gc::testing::NewPair(m()));
  Set(R(a), 77);
  Minor();
  Minor();  // promoted
  const std::vector<WeakEvent> promoted = EventsOf(WeakEventKind::kPromoted);
  ASSERT_EQ(promoted.size(), 1u);
  EXPECT_EQ(CookieEnv(promoted[0].cookie), kEnv);
  EXPECT_EQ(Handle(promoted[0]), 77);
  WeakEvent forged = promoted[0];
  forged.cookie = TagCookie(kEnv, CookieRecord(forged.cookie) + 1000);
  EXPECT_EQ(Handle(forged), std::nullopt) << "a record that never existed";
  EXPECT_EQ(Get(R(a)), 77) << "promotion keeps the tag";
}

TEST_F(TagMapTest, DeathReturnsTheTagAndFreesRecordAndSlot) {
  const size_t keep = Root(gc::testing::NewPair(m()));
  Set(R(keep), 1);
  Set(gc::testing::NewPair(m()), 2);  // garbage at once
  Set(gc::testing::NewPair(m()), 3);
  EXPECT_EQ(table().size(), 3u);
  Minor();
  const std::vector<WeakEvent> died = EventsOf(WeakEventKind::kDied);
  ASSERT_EQ(died.size(), 2u);
  std::vector<int64_t> tags;
  for (const WeakEvent& e : died) {
    ASSERT_EQ(CookieEnv(e.cookie), kEnv);
    std::optional<int64_t> tag = Handle(e);
    ASSERT_TRUE(tag.has_value());
    tags.push_back(*tag);
  }
  EXPECT_EQ(tags, (std::vector<int64_t>{2, 3})) << "in slot order";
  EXPECT_EQ(table().size(), 1u) << "the dead objects' slots are deleted";
  EXPECT_EQ(Get(R(keep)), 1);

  // A freed record is reused, with a fresh slot, for the next tagged object.
  const size_t next = Root(gc::testing::NewPair(m()));
  Set(R(next), 4);
  EXPECT_EQ(Get(R(next)), 4);
  EXPECT_EQ(table().size(), 2u);
  int seen = 0;
  tags_.ForEach(table(), [&](Object* o, int64_t tag) {
    ++seen;
    EXPECT_EQ(tag, o == R(keep) ? 1 : 4);
  });
  EXPECT_EQ(seen, 2);
}

TEST_F(TagMapTest, ANewObjectWhereADeadOneWasHasNoTag) {
  // The death report arrives after the pause; a lookup in between must not
  // give a dead object's tag to whatever now lives at its address (eden is
  // reused, so the next allocation is often at that very address).
  Object* dead = gc::testing::NewPair(m());
  Set(dead, 8);
  Minor();
  const size_t a = Root(gc::testing::NewPair(m()));
  EXPECT_EQ(Get(R(a)), 0) << "same address as the dead object: " << (R(a) == dead);
  const std::vector<WeakEvent> died = EventsOf(WeakEventKind::kDied);
  ASSERT_EQ(died.size(), 1u);
  EXPECT_EQ(Handle(died[0]), 8);
  EXPECT_EQ(Get(R(a)), 0);
  Set(R(a), 11);
  EXPECT_EQ(Get(R(a)), 11);
  EXPECT_EQ(table().size(), 1u);
}

TEST_F(TagMapTest, SnapshotAndSetAllSeeCurrentAddresses) {
  const size_t a = Root(gc::testing::NewPair(m()));
  const size_t b = Root(gc::testing::NewPair(m()));
  Set(R(a), 1);
  Set(R(b), 2);
  Minor();
  auto snap = tags_.Snapshot(table());
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[R(a)], 1);
  EXPECT_EQ(snap[R(b)], 2);
  tags_.SetAll(*heap_, kEnv, {{R(a), 0}, {R(b), 20}});
  EXPECT_EQ(Get(R(a)), 0);
  EXPECT_EQ(Get(R(b)), 20);
  EXPECT_EQ(table().size(), 1u);
}

}  // namespace
}  // namespace minivm::agent::testing
