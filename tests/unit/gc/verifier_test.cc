// Death tests proving that --verify-heap catches corruption.
#include "gc/verifier.h"

#include <cstring>

#include "gc/generational_heap.h"
#include "gtest/gtest.h"
#include "tests/unit/gc/gc_test_util.h"

namespace minivm::gc::testing {
namespace {

class VerifierDeathTest : public GcTest {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    GcTest::SetUp();
  }
};

TEST_F(VerifierDeathTest, CleanHeapPasses) {
  MakeList(1000);
  Minor();
  Full();
  heap_->VerifyNow(m());
}

TEST_F(VerifierDeathTest, RootIntoTheMiddleOfAnObject) {
  Object* p = NewArray(m(), 10);
  roots().push_back(Value::FromBits(reinterpret_cast<uint64_t>(p) + 16));
  EXPECT_DEATH(Minor(), "a mutator root.*not an object start");
}

TEST_F(VerifierDeathTest, FieldPointingOutsideTheHeap) {
  const size_t a = Root(NewPair(m()));
  static uint64_t not_heap[4];
  R(a)->fields()[0] = Value::FromBits(reinterpret_cast<uint64_t>(&not_heap[0]));
  EXPECT_DEATH(heap_->VerifyNow(m()), "not an object start in a live space");
}

TEST_F(VerifierDeathTest, MissingWriteBarrier) {
  const size_t holder = Root(NewPair(m()));
  Full();
  ASSERT_TRUE(heap_->InOld(R(holder)));
  R(holder)->fields()[0] = Value::Ref(NewPair(m()));  // no barrier
  EXPECT_DEATH(Minor(), "refers to young object .* but its card is clean");
}

TEST_F(VerifierDeathTest, CorruptKlass) {
  const size_t a = Root(NewPair(m()));
  Full();
  static const ClassLayout bogus{static_cast<LayoutKind>(7), 0};
  R(a)->klass = &bogus;
  EXPECT_DEATH(heap_->VerifyNow(m()), "unknown kind");
}

TEST_F(VerifierDeathTest, StaleForwardingBit) {
  const size_t a = Root(NewPair(m()));
  R(a)->gc_word |= gc_word::kMarked;
  EXPECT_DEATH(heap_->VerifyNow(m()), "gc_word");
}

TEST_F(VerifierDeathTest, StaleBytesInALiveTlabTailAreSkipped) {
  // A TLAB is not zeroed (tlab.h): its unused tail holds whatever eden held
  // before, and the eden walk skips it by the thread's Tlab.
  NewPair(m());
  std::memset(reinterpret_cast<void*>(m()->tlab.top), 0xab, m()->tlab.end - m()->tlab.top);
  heap_->VerifyNow(m());
}

TEST_F(VerifierDeathTest, FillerWordPastEdenTop) {
  Object* a = NewPair(m());
  NewPair(m());
  *reinterpret_cast<uint64_t*>(a) = FillerWord(size_t{1} << 30);
  EXPECT_DEATH(heap_->VerifyNow(m()), "filler word");
}

}  // namespace
}  // namespace minivm::gc::testing
