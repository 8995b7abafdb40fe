// The Heap interface as the VM uses it: creation and option validation,
// allocation results, statistics, --verbose:gc, --gc-stress, exhaustion.
#include "gc/heap.h"

#include <cstdio>
#include <string>

#include "gc/generational_heap.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/gc/gc_test_util.h"

namespace minivm::gc::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(HeapCreateTest, DefaultsAreOneGigabyteWithAThirdYoung) {
  MockVm vm;
  HeapOptions o;
  EXPECT_EQ(o.max_heap_bytes, size_t{1} << 30);
  auto heap = GenerationalHeap::Make(o, &vm);
  ASSERT_TRUE(heap.ok()) << heap.status();
  EXPECT_NEAR(static_cast<double>((*heap)->young().capacity()), (1 << 30) / 3.0, 64 << 10);
  EXPECT_EQ((*heap)->Stats().heap_capacity_bytes, size_t{1} << 30);
}

TEST(HeapCreateTest, RejectsImpossibleSizes) {
  MockVm vm;
  HeapOptions o;
  o.max_heap_bytes = 1000;
  auto h = Heap::Create(o, &vm);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(h.status().message(), HasSubstr("below the minimum"));

  o.max_heap_bytes = 8 << 20;
  o.young_bytes = 8 << 20;
  h = Heap::Create(o, &vm);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(h.status().message(), HasSubstr("must be smaller than the heap"));

  o.young_bytes = 4 << 10;
  h = Heap::Create(o, &vm);
  EXPECT_THAT(h.status().message(), HasSubstr("young generation size"));

  o.young_bytes = (8 << 20) - (64 << 10);
  h = Heap::Create(o, &vm);
  EXPECT_THAT(h.status().message(), HasSubstr("old generation"));

  o.young_bytes = 2 << 20;
  EXPECT_TRUE(Heap::Create(o, &vm).ok());
}

class HeapTest : public GcTest {};

TEST_F(HeapTest, AllocationsAreZeroedAndInitialised) {
  for (int i = 0; i < 10000; ++i) {
    Object* p = NewPair(m());
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->klass, &kPairLayout);
    EXPECT_EQ(p->gc_word, 0u);
    EXPECT_TRUE(p->fields()[0].IsNull());
    EXPECT_TRUE(p->fields()[1].IsNull());
    p->fields()[0] = Value::Int(i);  // dirty the memory for the next round
  }
  Object* a = NewArray(m(), 100);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->length(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_TRUE(a->elements()[i].IsNull());
  Object* b = NewBytes(m(), 13);
  EXPECT_EQ(b->length(), 13u);
  EXPECT_EQ(b->Size(), 40u);
}

TEST_F(HeapTest, MemoryIsZeroedAgainAfterReuse) {
  // Eden is reused after each collection, and TLABs are not cleared when
  // handed out (tlab.h): each object is zeroed as it is allocated, on the
  // fast path and on every slow path (refill, outside a TLAB). Garbage
  // must never leak through, into fields, elements, bytes or the gc_word.
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 50000; ++i) {
      Object* p = NewPair(m());
      ASSERT_EQ(p->gc_word, 0u);
      ASSERT_TRUE(p->fields()[0].IsNull() && p->fields()[1].IsNull());
      p->fields()[0] = Value::Int(-1);
      p->fields()[1] = Value::Int(-1);
      if (i % 101 == 0) {
        const uint64_t n = i % 700;  // up to 5.6 KiB, some outside the TLAB
        Object* a = NewArray(m(), n);
        Object* b = NewBytes(m(), n);
        for (uint64_t k = 0; k < n; ++k) {
          ASSERT_TRUE(a->elements()[k].IsNull()) << "round " << round << " element " << k;
          ASSERT_EQ(b->bytes()[k], 0) << "round " << round << " byte " << k;
          a->elements()[k] = Value::Int(-1);
          b->bytes()[k] = 0xff;
        }
      }
    }
    Minor();
  }
}

TEST_F(HeapTest, StatsCountAllocationsAndCollections) {
  const size_t list = MakeList(1000);
  Minor();
  Full();
  HeapStats s = heap_->Stats();
  EXPECT_GE(s.bytes_allocated, 1000 * FieldsObjectSize(2));
  EXPECT_EQ(s.minor_collections, 1u);
  EXPECT_EQ(s.full_collections, 1u);
  EXPECT_GT(s.total_pause_ns, 0u);
  EXPECT_GE(s.total_pause_ns, s.max_pause_ns);
  EXPECT_GE(s.bytes_promoted, 1000 * FieldsObjectSize(2));
  ExpectList(list, 1000);
}

TEST_F(HeapTest, VerboseGcPrintsOneLinePerCollection) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* log = open_memstream(&buf, &len);
  RemakeHeap([&](HeapOptions& o) { o.verbose_gc = true; o.gc_log = log; });
  MakeList(100);
  Minor();
  Full();
  std::fclose(log);
  std::string out(buf, len);
  free(buf);
  EXPECT_THAT(out, MatchesRegex("\\[gc\\] minor \\(explicit\\) [0-9.]+M->[0-9.]+M \\(16\\.0M\\) "
                                "[0-9.]+ms\n"
                                "\\[gc\\] full \\(explicit\\) [0-9.]+M->[0-9.]+M \\(16\\.0M\\) "
                                "[0-9.]+ms\n"));
}

TEST_F(HeapTest, GcStressCollectsEveryNthSlowPath) {
  RemakeHeap([&](HeapOptions& o) { o.gc_stress_every = 3; });
  const size_t list = MakeList(200);
  // Large objects always take the slow path: 36 of them, >= 12 collections.
  for (int i = 0; i < 36; ++i) ASSERT_NE(NewArray(m(), 2000), nullptr);
  HeapStats s = heap_->Stats();
  EXPECT_GE(s.minor_collections + s.full_collections, 10u);
  ExpectList(list, 200);
}

TEST_F(HeapTest, RequestLargerThanTheHeapFailsAtOnce) {
  EXPECT_EQ(NewArray(m(), uint64_t{64} << 20), nullptr);
  EXPECT_EQ(heap_->Stats().full_collections, 0u);
  EXPECT_EQ(AllocateSlowPath(m(), &kArrayLayout, kMaxObjectSize + 8, 1), nullptr);
}

TEST_F(HeapTest, ExhaustionReturnsNullThenRecovers) {
  // Keep everything alive: eventually even a full collection cannot help.
  const size_t holder = Root(nullptr);
  roots()[holder] = Value::Null();
  int allocated = 0;
  for (;;) {
    Object* node = NewArray(m(), 62);  // 520 bytes, lives in young then old
    if (node == nullptr) break;
    Store(m(), node, &node->elements()[0], roots()[holder]);
    roots()[holder] = Value::Ref(node);
    ++allocated;
    ASSERT_LT(allocated, 1 << 20) << "the heap never reported exhaustion";
  }
  EXPECT_GT(allocated * 520, 8 << 20);
  EXPECT_EQ(NewArray(m(), 62), nullptr);  // still exhausted, still no crash
  // Large objects run out too (some free pages may remain for a few).
  int large = 0;
  for (Object* big; (big = NewArray(m(), 5000)) != nullptr;) {
    Store(m(), big, &big->elements()[0], roots()[holder]);
    roots()[holder] = Value::Ref(big);
    ASSERT_LT(++large, 1000);
  }
  roots()[holder] = Value::Null();
  ASSERT_NE(NewPair(m()), nullptr);
  ASSERT_NE(NewArray(m(), 5000), nullptr);
}

TEST_F(HeapTest, ContainsCoversTheReservation) {
  Object* p = NewPair(m());
  EXPECT_TRUE(heap_->Contains(p));
  int local;
  EXPECT_FALSE(heap_->Contains(&local));
}

}  // namespace
}  // namespace minivm::gc::testing
