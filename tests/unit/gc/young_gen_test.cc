// Minor collections: Cheney copying, ages, tenuring, premature promotion.
#include "gc/young_gen.h"

#include "gc/generational_heap.h"
#include "gtest/gtest.h"
#include "tests/unit/gc/gc_test_util.h"

namespace minivm::gc::testing {
namespace {

class YoungGenTest : public GcTest {};

TEST_F(YoungGenTest, SurvivorsAreCopiedWithTheirContents) {
  const size_t list = MakeList(1000);
  Object* before = R(list);
  ASSERT_TRUE(heap_->InEden(before));
  Minor();
  EXPECT_NE(R(list), before);
  EXPECT_TRUE(heap_->InSurvivor(R(list)));
  EXPECT_EQ(R(list)->Age(), 1u);
  ExpectList(list, 1000);
  EXPECT_EQ(heap_->young().eden_used(), 0u);
  EXPECT_EQ(heap_->young().from().used(), 1000 * FieldsObjectSize(2));
}

TEST_F(YoungGenTest, GarbageIsNotCopied) {
  const size_t keep = Root(NewPair(m()));
  for (int i = 0; i < 100000; ++i) NewPair(m());
  Minor();
  EXPECT_EQ(heap_->young().from().used(), FieldsObjectSize(2));
  EXPECT_TRUE(heap_->InSurvivor(R(keep)));
}

TEST_F(YoungGenTest, SharingAndCyclesArePreserved) {
  const size_t a = Root(NewPair(m()));
  const size_t b = Root(NewPair(m()));
  Store(m(), R(a), &R(a)->fields()[0], Value::Ref(R(b)));
  Store(m(), R(b), &R(b)->fields()[0], Value::Ref(R(a)));
  Store(m(), R(a), &R(a)->fields()[1], Value::Ref(R(a)));
  roots().push_back(roots()[b]);  // two roots to one object
  Minor();
  Minor();
  EXPECT_EQ(R(a)->fields()[0].AsRef(), R(b));
  EXPECT_EQ(R(b)->fields()[0].AsRef(), R(a));
  EXPECT_EQ(R(a)->fields()[1].AsRef(), R(a));
  EXPECT_EQ(roots().back().AsRef(), R(b));
  EXPECT_EQ(R(a)->Age(), 2u);
}

TEST_F(YoungGenTest, ArraysAndBytesSurvive) {
  const size_t arr = Root(NewArray(m(), 10));
  const size_t bytes = Root(NewBytes(m(), 5));
  std::memcpy(R(bytes)->bytes(), "hello", 5);
  for (int i = 0; i < 10; ++i) {
    Object* p = NewPair(m());
    p->fields()[0] = Value::Int(i * 7);
    Store(m(), R(arr), &R(arr)->elements()[i], Value::Ref(p));
  }
  Minor();
  ASSERT_EQ(R(arr)->length(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(R(arr)->elements()[i].AsRef()->fields()[0].AsInt(), i * 7);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(R(bytes)->bytes()), 5), "hello");
}

TEST_F(YoungGenTest, ObjectsArePromotedAtTheTenuringThreshold) {
  RemakeHeap([&](HeapOptions& o) { o.max_tenuring_threshold = 3; });
  const size_t x = Root(NewPair(m()));
  for (uint32_t gc = 1; gc <= 3; ++gc) {
    Minor();
    EXPECT_TRUE(heap_->InSurvivor(R(x))) << gc;
    EXPECT_EQ(R(x)->Age(), gc);
  }
  Minor();
  EXPECT_TRUE(heap_->InOld(R(x)));
  EXPECT_EQ(R(x)->Age(), 4u);
  Object* old = R(x);
  Minor();
  EXPECT_EQ(R(x), old);  // old objects do not move
}

TEST_F(YoungGenTest, ThresholdZeroPromotesImmediately) {
  RemakeHeap([&](HeapOptions& o) { o.max_tenuring_threshold = 0; });
  const size_t list = MakeList(100);
  Minor();
  EXPECT_TRUE(heap_->InOld(R(list)));
  ExpectList(list, 100);
}

TEST_F(YoungGenTest, SurvivorOverflowPromotesPrematurely) {
  // 4 MiB young: survivors of ~384 KiB. Keep ~1.2 MiB alive.
  const size_t survivor = heap_->young().from().capacity();
  const int n = static_cast<int>(3 * survivor / FieldsObjectSize(2));
  const size_t list = MakeList(n);
  Minor();
  EXPECT_LE(heap_->young().from().used(), survivor);
  EXPECT_GT(heap_->Stats().bytes_promoted, survivor);
  ExpectList(list, n);
}

TEST_F(YoungGenTest, AdaptiveThresholdDropsWhenSurvivorsFillUp) {
  EXPECT_EQ(heap_->tenuring_threshold(), 15u);
  const size_t survivor = heap_->young().from().capacity();
  MakeList(static_cast<int>(0.8 * survivor / FieldsObjectSize(2)));
  Minor();
  EXPECT_EQ(heap_->tenuring_threshold(), 1u);
  EXPECT_EQ(heap_->Stats().tenuring_threshold, 1u);
}

TEST_F(YoungGenTest, EdenExhaustionTriggersMinorCollections) {
  const size_t list = MakeList(1000);
  for (int i = 0; i < 1000000; ++i) ASSERT_NE(NewPair(m()), nullptr);  // 32 MB of garbage
  HeapStats s = heap_->Stats();
  EXPECT_GE(s.minor_collections, 8u);
  EXPECT_EQ(s.full_collections, 0u);
  ExpectList(list, 1000);
}

}  // namespace
}  // namespace minivm::gc::testing
