// The old generation: size-class cells, sweeping, page reuse, the large-object
// space, and full collections through the heap.
#include "gc/old_space.h"

#include <sys/mman.h>

#include <set>
#include <vector>

#include "gc/generational_heap.h"
#include "gc/size_classes.h"
#include "gtest/gtest.h"
#include "tests/unit/gc/gc_test_util.h"

namespace minivm::gc::testing {
namespace {

TEST(SizeClassTest, SmallestFittingClass) {
  EXPECT_EQ(kSizeClasses[SizeClassIndex(16)], 16u);
  EXPECT_EQ(kSizeClasses[SizeClassIndex(24)], 24u);
  EXPECT_EQ(kSizeClasses[SizeClassIndex(136)], 160u);
  EXPECT_EQ(kSizeClasses[SizeClassIndex(8192)], 8192u);
  for (size_t s = 16; s <= kLargeObjectThreshold; s += 8) {
    const size_t c = SizeClassIndex(s);
    ASSERT_GE(kSizeClasses[c], s);
    if (c > 0) {
      ASSERT_LT(kSizeClasses[c - 1], s);
    }
  }
  EXPECT_GT(WorstCaseExpansion(), 1.0);
  EXPECT_LT(WorstCaseExpansion(), 1.5);
}

class OldSpaceUnitTest : public ::testing::Test {
 protected:
  static constexpr size_t kPages = 64;
  void SetUp() override {
    mem_ = mmap(nullptr, kPages * kPageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                -1, 0);
    ASSERT_NE(mem_, MAP_FAILED);
    space_ = std::make_unique<OldSpace>(reinterpret_cast<uintptr_t>(mem_), kPages * kPageSize);
  }
  void TearDown() override { munmap(mem_, kPages * kPageSize); }
  Object* Small(size_t size, bool mark) {
    Object* o = space_->AllocateSmall(size);
    o->klass = &kBytesLayout;
    o->gc_word = mark ? gc_word::kMarked : 0;
    o->set_length(size - kArrayHeaderSize);
    return o;
  }
  void* mem_;
  std::unique_ptr<OldSpace> space_;
};

TEST_F(OldSpaceUnitTest, CellsOfOneClassShareAPage) {
  Object* a = Small(32, true);
  Object* b = Small(32, true);
  Object* c = Small(40, true);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) - reinterpret_cast<uintptr_t>(a), 32u);
  EXPECT_NE((reinterpret_cast<uintptr_t>(c) - space_->base()) / kPageSize,
            (reinterpret_cast<uintptr_t>(a) - space_->base()) / kPageSize);
  EXPECT_EQ(space_->free_pages(), kPages - 2);
  EXPECT_TRUE(space_->IsObjectStart(reinterpret_cast<uintptr_t>(b)));
  EXPECT_FALSE(space_->IsObjectStart(reinterpret_cast<uintptr_t>(b) + 8));
  space_->VerifyFreeLists();
}

TEST_F(OldSpaceUnitTest, SweepFreesUnmarkedAndReleasesEmptyPages) {
  std::vector<Object*> live;
  for (int i = 0; i < 3000; ++i) {
    Object* o = Small(48, i % 3 == 0);
    if (i % 3 == 0) live.push_back(o);
  }
  for (int i = 0; i < 100; ++i) Small(96, false);  // a wholly dead page
  const size_t free_before = space_->free_pages();
  space_->Sweep();
  space_->VerifyFreeLists();
  EXPECT_EQ(space_->free_pages(), free_before + 1);
  EXPECT_EQ(space_->used_bytes(), live.size() * 48);
  size_t count = 0;
  space_->ForEachObject([&](Object* o) {
    EXPECT_EQ(o->gc_word, 0u) << "marks are cleared";
    ++count;
  });
  EXPECT_EQ(count, live.size());
  // Freed cells are reused before new pages are taken.
  const size_t pages = space_->free_pages();
  for (int i = 0; i < 1000; ++i) Small(48, false);
  EXPECT_EQ(space_->free_pages(), pages);
}

TEST_F(OldSpaceUnitTest, LargeRunsAreFirstFitAndReleasedBySweep) {
  Object* a = space_->AllocateLarge(3 * kPageSize);
  ASSERT_NE(a, nullptr);
  a->klass = &kBytesLayout;
  Object* b = space_->AllocateLarge(kPageSize + 8);
  b->klass = &kBytesLayout;
  b->gc_word = gc_word::kMarked;
  EXPECT_EQ(space_->free_pages(), kPages - 5);
  EXPECT_EQ(space_->AllocateLarge(kPages * kPageSize), nullptr);
  space_->Sweep();
  EXPECT_EQ(space_->free_pages(), kPages - 2);
  Object* c = space_->AllocateLarge(2 * kPageSize);
  EXPECT_EQ(c, a) << "first fit reuses the freed run";
}

TEST_F(OldSpaceUnitTest, ObjectsStartingInACard) {
  std::vector<Object*> objs;
  for (int i = 0; i < 40; ++i) objs.push_back(Small(48, true));
  const uintptr_t page = reinterpret_cast<uintptr_t>(objs[0]);
  std::vector<Object*> seen;
  space_->ForEachObjectStartingIn(page + 512, page + 1024, [&](Object* o) { seen.push_back(o); });
  // Cells at 48-byte steps whose start lies in [512, 1024): 528 .. 1008.
  ASSERT_EQ(seen.size(), 11u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(seen.front()), page + 528);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(seen.back()), page + 1008);
}

TEST_F(OldSpaceUnitTest, CanFitCountsFreeCellsAndPages) {
  std::array<uint64_t, kNumSizeClasses> need{};
  need[SizeClassIndex(8192)] = 4 * kPages;
  EXPECT_TRUE(space_->CanFit(need));
  need[SizeClassIndex(16)] = 1;
  EXPECT_FALSE(space_->CanFit(need));
}

class OldSpaceTest : public GcTest {};

TEST_F(OldSpaceTest, FullCollectionFreesUnreachableOldObjects) {
  const size_t keep = MakeList(1000);
  size_t drop = MakeList(20000);
  Full();
  EXPECT_TRUE(heap_->InOld(R(keep)));
  const size_t used_both = heap_->old_space().used_bytes();
  roots()[drop] = Value::Null();
  Full();
  EXPECT_LT(heap_->old_space().used_bytes(), used_both);
  EXPECT_EQ(heap_->old_space().used_bytes(), 1000 * 32u);
  ExpectList(keep, 1000);
}

TEST_F(OldSpaceTest, LargeObjectsLiveInTheOldGenerationAndAreSwept) {
  Object* big = NewArray(m(), 2000);  // 16 KB > threshold
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(heap_->InOld(big));
  EXPECT_EQ(big->length(), 2000u);
  const size_t i = Root(big);
  Store(m(), R(i), &R(i)->elements()[1999], Value::Ref(NewPair(m())));
  Minor();
  EXPECT_EQ(R(i), big) << "large objects never move";
  EXPECT_TRUE(heap_->InSurvivor(R(i)->elements()[1999].AsRef()));
  const size_t free_pages = heap_->old_space().free_pages();
  roots()[i] = Value::Null();
  Full();
  EXPECT_GT(heap_->old_space().free_pages(), free_pages);
  EXPECT_EQ(heap_->Stats().large_objects_allocated, 1u);
}

TEST_F(OldSpaceTest, OldGenerationFillingUpTriggersFullCollections) {
  // Promote garbage continuously: threshold 0 sends every survivor to old.
  RemakeHeap([&](HeapOptions& o) { o.max_tenuring_threshold = 0; });
  const size_t keep = MakeList(100);
  // A ring of 300 rooted 4 KB arrays: each minor collection promotes what
  // the ring holds, and the ring's old entries die in the old generation.
  const size_t ring = roots().size();
  roots().resize(ring + 300);
  for (int i = 0; i < 20000; ++i) {
    roots()[ring + i % 300] = Value::Ref(NewArray(m(), 500));
    for (int j = 0; j < 20; ++j) NewPair(m());
  }
  EXPECT_GE(heap_->Stats().full_collections, 1u);
  ExpectList(keep, 100);
}

TEST_F(OldSpaceTest, FullCollectionWithLiveYoungAndOldMix) {
  const size_t a = MakeList(5000);
  Minor();
  const size_t b = MakeList(5000);
  Object* big = NewArray(m(), 3000);
  const size_t c = Root(big);
  for (int i = 0; i < 3000; i += 100) {
    Store(m(), R(c), &R(c)->elements()[i], Value::Ref(R(b)));
  }
  Full();
  ExpectList(a, 5000);
  ExpectList(b, 5000);
  EXPECT_TRUE(heap_->InOld(R(b)));
  EXPECT_EQ(R(c)->elements()[100].AsRef(), R(b));
  EXPECT_EQ(heap_->young().used(), 0u);
}

}  // namespace
}  // namespace minivm::gc::testing
