// Card marking and card scanning: old-to-young edges keep young objects
// alive across minor collections, and cards are cleaned once no such edge
// remains.
#include "gc/card_table.h"

#include <vector>

#include "gc/generational_heap.h"
#include "gtest/gtest.h"
#include "tests/unit/gc/gc_test_util.h"

namespace minivm::gc::testing {
namespace {

TEST(CardTableUnitTest, FindsExactlyTheDirtyCards) {
  CardTable cards;
  const uintptr_t base = uintptr_t{1} << 32;
  ASSERT_TRUE(cards.Init(base, 1 << 20).ok());
  const std::vector<uintptr_t> dirty = {base, base + 512 * 7, base + 512 * 8 + 100,
                                        base + (1 << 20) - 1};
  for (uintptr_t a : dirty) cards.Dirty(a);
  std::vector<uintptr_t> seen;
  cards.ForEachDirtyCard(base, base + (1 << 20), [&](uintptr_t c) { seen.push_back(c); });
  EXPECT_EQ(seen,
            (std::vector<uintptr_t>{base, base + 512 * 7, base + 512 * 8, base + (1 << 20) - 512}));
  EXPECT_TRUE(cards.IsDirty(base + 511));
  EXPECT_FALSE(cards.IsDirty(base + 512));
  cards.Clear(base, base + (1 << 20));
  seen.clear();
  cards.ForEachDirtyCard(base, base + (1 << 20), [&](uintptr_t c) { seen.push_back(c); });
  EXPECT_TRUE(seen.empty());
}

class CardTableTest : public GcTest {
 protected:
  // An old object (promoted at once) rooted at the returned index.
  size_t OldArray(uint64_t n) {
    const size_t i = Root(NewArray(m(), n));
    Full();
    EXPECT_TRUE(heap_->InOld(R(i)));
    return i;
  }
};

TEST_F(CardTableTest, YoungObjectReachableOnlyFromOldSurvives) {
  const size_t holder = OldArray(4);
  EXPECT_FALSE(heap_->IsCardDirty(R(holder)));
  Object* young = NewPair(m());
  young->fields()[0] = Value::Int(42);
  Store(m(), R(holder), &R(holder)->elements()[2], Value::Ref(young));
  EXPECT_TRUE(heap_->IsCardDirty(R(holder)));
  for (int i = 0; i < 3; ++i) {
    Minor();
    Object* y = R(holder)->elements()[2].AsRef();
    EXPECT_TRUE(heap_->InSurvivor(y));
    EXPECT_EQ(y->fields()[0].AsInt(), 42);
    EXPECT_TRUE(heap_->IsCardDirty(R(holder))) << "old->young edge remains, card must stay dirty";
  }
}

TEST_F(CardTableTest, CardIsCleanedOnceTheReferentIsPromoted) {
  RemakeHeap([&](HeapOptions& o) { o.max_tenuring_threshold = 1; });
  const size_t holder = OldArray(4);
  Store(m(), R(holder), &R(holder)->elements()[0], Value::Ref(NewPair(m())));
  Minor();  // referent to survivor
  EXPECT_TRUE(heap_->IsCardDirty(R(holder)));
  Minor();  // referent promoted
  EXPECT_TRUE(heap_->InOld(R(holder)->elements()[0].AsRef()));
  EXPECT_FALSE(heap_->IsCardDirty(R(holder)));
}

TEST_F(CardTableTest, CardIsCleanedWhenTheEdgeIsOverwritten) {
  const size_t holder = OldArray(4);
  Store(m(), R(holder), &R(holder)->elements()[0], Value::Ref(NewPair(m())));
  R(holder)->elements()[0] = Value::Int(1);
  Minor();
  EXPECT_FALSE(heap_->IsCardDirty(R(holder)));
}

TEST_F(CardTableTest, PromotedObjectReferringToSurvivorDirtiesItsCard) {
  RemakeHeap([&](HeapOptions& o) { o.max_tenuring_threshold = 1; });
  const size_t a = Root(NewPair(m()));
  Minor();  // a: age 1 in survivor
  Store(m(), R(a), &R(a)->fields()[0], Value::Ref(NewPair(m())));
  Minor();  // a promoted, its new child copied to the survivor
  ASSERT_TRUE(heap_->InOld(R(a)));
  ASSERT_TRUE(heap_->InSurvivor(R(a)->fields()[0].AsRef()));
  EXPECT_TRUE(heap_->IsCardDirty(R(a)));
  Minor();
  EXPECT_TRUE(heap_->InOld(R(a)->fields()[0].AsRef()));
}

TEST_F(CardTableTest, LargeObjectsAreCardScanned) {
  const size_t big = Root(NewArray(m(), 100000));  // 800 KB, in the LOS
  ASSERT_TRUE(heap_->InOld(R(big)));
  for (int i = 0; i < 100000; i += 9999) {
    Object* p = NewPair(m());
    p->fields()[0] = Value::Int(i);
    Store(m(), R(big), &R(big)->elements()[i], Value::Ref(p));
  }
  for (int round = 0; round < 3; ++round) {
    for (int j = 0; j < 200000; ++j) NewPair(m());
    for (int i = 0; i < 100000; i += 9999) {
      ASSERT_EQ(R(big)->elements()[i].AsRef()->fields()[0].AsInt(), i);
    }
  }
  EXPECT_GE(heap_->Stats().minor_collections, 2u);
}

TEST_F(CardTableTest, ManyOldHoldersAcrossManyCards) {
  // 2000 old pairs each pointing at a fresh young pair, across many cards.
  const size_t arr = Root(NewArray(m(), 2000));
  for (int i = 0; i < 2000; ++i) {
    Store(m(), R(arr), &R(arr)->elements()[i], Value::Ref(NewPair(m())));
  }
  Full();  // everything old now
  for (int i = 0; i < 2000; ++i) {
    Object* holder = R(arr)->elements()[i].AsRef();
    Object* y = NewPair(m());
    y->fields()[0] = Value::Int(i);
    Store(m(), holder, &holder->fields()[1], Value::Ref(y));
  }
  Minor();
  Minor();
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(R(arr)->elements()[i].AsRef()->fields()[1].AsRef()->fields()[0].AsInt(), i);
  }
}

}  // namespace
}  // namespace minivm::gc::testing
