// TLABs: invariants after every slow path, adaptive sizing, outside-TLAB
// allocation, the filler word over a retired TLAB's tail. (That objects are
// zeroed in reused memory, which TLABs no longer are: heap_test.cc.)
#include "gc/tlab.h"

#include <thread>

#include "gc/generational_heap.h"
#include "gc/tlab_sizer.h"
#include "gtest/gtest.h"
#include "tests/unit/gc/gc_test_util.h"

namespace minivm::gc::testing {
namespace {

void ExpectInvariants(const Tlab& t) {
  EXPECT_LE(t.start, t.top);
  EXPECT_LE(t.top, t.current_end);
  EXPECT_EQ(t.current_end, t.end);
}

TEST(TlabSizerTest, SizeFollowsTheThreadsShareOfAllocation) {
  const size_t eden = 64 << 20;
  TlabSizer busy, idle;
  busy.Init(eden, 2);
  idle.Init(eden, 2);
  EXPECT_EQ(busy.desired_bytes(), eden / 2 / kTargetRefills / 8 * 8);
  for (int epoch = 0; epoch < 20; ++epoch) {
    busy.RecordAllocatedBytes(eden * 99 / 100);
    idle.RecordAllocatedBytes(eden / 100);
    busy.OnCollection(eden, eden);
    idle.OnCollection(eden, eden);
  }
  EXPECT_GT(busy.desired_bytes(), 40 * idle.desired_bytes());
  EXPECT_NEAR(busy.allocation_fraction(), 0.99, 0.01);
  EXPECT_LE(busy.desired_bytes(), kMaxTlabBytes);
  EXPECT_GE(idle.desired_bytes(), kMinTlabBytes);
}

TEST(TlabSizerTest, ClampedToMinimumAndMaximum) {
  TlabSizer s;
  s.Init(size_t{1} << 40, 1);
  EXPECT_EQ(s.desired_bytes(), kMaxTlabBytes);
  s.Init(size_t{64} << 10, 16);
  EXPECT_EQ(s.desired_bytes(), kMinTlabBytes);
}

TEST(TlabSizerTest, WasteLimitDecidesOutsideAllocation) {
  TlabSizer s;
  s.Init(size_t{64} << 20, 1);
  EXPECT_TRUE(s.ShouldAllocateOutside(0, s.desired_bytes() + 8));     // too big for any TLAB
  EXPECT_FALSE(s.ShouldAllocateOutside(s.refill_waste_limit(), 64));  // small tail: refill
  const size_t limit = s.refill_waste_limit();
  EXPECT_TRUE(s.ShouldAllocateOutside(limit + 8, 64));  // big tail: keep it
  EXPECT_EQ(s.refill_waste_limit(), limit + kWasteIncrement);
}

class TlabTest : public GcTest {};

TEST_F(TlabTest, FirstAllocationRefillsAnEmptyTlab) {
  EXPECT_EQ(m()->tlab.top, 0u);
  EXPECT_EQ(m()->tlab.end, 0u);
  Object* p = NewPair(m());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p), m()->tlab.start);
  EXPECT_TRUE(heap_->InEden(p));
  ExpectInvariants(m()->tlab);
}

TEST_F(TlabTest, InvariantsHoldAfterEverySlowPath) {
  const size_t keep = Root(nullptr);
  for (int i = 0; i < 200000; ++i) {
    const uintptr_t before = m()->tlab.end;
    Object* o = (i % 97 == 0) ? NewArray(m(), i % 1500) : NewPair(m());
    ASSERT_NE(o, nullptr);
    if (m()->tlab.end != before) ExpectInvariants(m()->tlab);
    if (i % 1000 == 0) roots()[keep] = Value::Ref(o);
  }
}

TEST_F(TlabTest, ObjectsLargerThanTheTlabGoOutsideIt) {
  NewPair(m());
  const Tlab before = m()->tlab;
  const size_t desired = before.end - before.start;
  Object* big = NewArray(m(), (desired + 64) / 8);  // larger than any TLAB
  ASSERT_NE(big, nullptr);
  if (desired + 64 + 24 <= kLargeObjectThreshold) {
    EXPECT_TRUE(heap_->InEden(big));
  } else {
    EXPECT_TRUE(heap_->InOld(big));
  }
  EXPECT_EQ(m()->tlab.start, before.start) << "the current TLAB is kept";
  EXPECT_EQ(m()->tlab.top, before.top);
  for (uint64_t i = 0; i < big->length(); ++i) ASSERT_TRUE(big->elements()[i].IsNull());
}

TEST_F(TlabTest, RetiringWritesAFillerWordOverTheTail) {
  NewPair(m());
  const Tlab first = m()->tlab;
  ASSERT_LT(first.top, first.end);
  // Fill the TLAB to within one small object of its end, so the next
  // allocation refills and retires this one with a tail.
  while (m()->tlab.start == first.start && m()->tlab.end - m()->tlab.top >= 64) NewPair(m());
  const uintptr_t tail = m()->tlab.top;
  const size_t tail_bytes = m()->tlab.end - tail;
  ASSERT_EQ(m()->tlab.start, first.start);
  NewArray(m(), 64);  // 536 bytes: does not fit the tail, refills
  ASSERT_NE(m()->tlab.start, first.start);
  const uint64_t word = *reinterpret_cast<const uint64_t*>(tail);
  EXPECT_TRUE(IsFillerWord(word));
  EXPECT_EQ(FillerBytes(word), tail_bytes);
  heap_->VerifyNow(m());  // eden parses across the retired tail
}

TEST_F(TlabTest, CollectionsRetireTlabs) {
  NewPair(m());
  EXPECT_NE(m()->tlab.end, 0u);
  Minor();
  EXPECT_EQ(m()->tlab.top, 0u);
  EXPECT_EQ(m()->tlab.end, 0u);
  EXPECT_EQ(m()->tlab.current_end, 0u);
}

TEST_F(TlabTest, BusyThreadGetsLargerTlabsThanAnIdleOne) {
  TestThread idle;
  heap_->AttachMutator(&idle.mutator);
  // Two mutators on one thread: whichever is not allocating must be in a
  // blocked region, or a collection would wait for it forever.
  auto with_other_blocked = [&](Mutator* blocked, auto fn) {
    BlockedScope scope(blocked);
    fn();
  };
  for (int round = 0; round < 10; ++round) {
    with_other_blocked(m(), [&] { NewPair(&idle.mutator); });
    with_other_blocked(&idle.mutator, [&] {
      for (int i = 0; i < 100000; ++i) NewPair(m());
    });
  }
  with_other_blocked(m(), [&] { NewPair(&idle.mutator); });
  with_other_blocked(&idle.mutator, [&] { NewPair(m()); });
  // Allocate until both refill, then compare TLAB sizes.
  const size_t busy_size = m()->tlab.end - m()->tlab.start;
  const size_t idle_size = idle.mutator.tlab.end - idle.mutator.tlab.start;
  EXPECT_GT(busy_size, 4 * idle_size);
  heap_->DetachMutator(&idle.mutator);
}

}  // namespace
}  // namespace minivm::gc::testing
