// Shared fixtures for the GC's unit tests: a mock VM (a global root
// array plus one root array per test thread), fake class layouts, and helpers
// that build object graphs through gc::Allocate so that every test exercises
// the real fast and slow paths.
#ifndef MINIVM_TESTS_UNIT_GC_GC_TEST_UTIL_H_
#define MINIVM_TESTS_UNIT_GC_GC_TEST_UTIL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "gc/allocation.h"
#include "gc/generational_heap.h"
#include "gc/heap.h"
#include "gc/object.h"
#include "gc/vm_interface.h"
#include "gc/write_barrier.h"
#include "gtest/gtest.h"

namespace minivm::gc::testing {

inline const ClassLayout kPairLayout{LayoutKind::kFields, 2};
inline const ClassLayout kEmptyLayout{LayoutKind::kFields, 0};
inline const ClassLayout kArrayLayout{LayoutKind::kRefArray, 0};
inline const ClassLayout kBytesLayout{LayoutKind::kByteArray, 0};

// A VM thread as the mock sees it: the Mutator at offset 0, then its roots.
struct TestThread {
  Mutator mutator;
  std::vector<Value> roots;
};
static_assert(offsetof(TestThread, mutator) == 0);

class MockVm final : public VmInterface {
 public:
  std::vector<Value> globals;

  void VisitGlobalRoots(RootVisitor& visitor) override {
    if (!globals.empty()) visitor.VisitRoots(globals.data(), globals.data() + globals.size());
  }
  void VisitMutatorRoots(Mutator* m, RootVisitor& visitor) override {
    auto* t = reinterpret_cast<TestThread*>(m);
    if (!t->roots.empty()) visitor.VisitRoots(t->roots.data(), t->roots.data() + t->roots.size());
  }
};

inline Object* NewPair(Mutator* m) { return Allocate(m, &kPairLayout, FieldsObjectSize(2), 0); }
inline Object* NewArray(Mutator* m, uint64_t n) {
  return Allocate(m, &kArrayLayout, RefArraySize(n), n);
}
inline Object* NewBytes(Mutator* m, uint64_t n) {
  return Allocate(m, &kBytesLayout, ByteArraySize(n), n);
}
// Stores with the write barrier, as the interpreter does.
inline void Store(Mutator* m, Object* holder, Value* slot, Value v) {
  *slot = v;
  WriteBarrier(m, holder, v);
}

class GcTest : public ::testing::Test {
 protected:
  static HeapOptions SmallHeapOptions() {
    HeapOptions o;
    o.max_heap_bytes = size_t{16} << 20;
    o.young_bytes = size_t{4} << 20;
    o.verify_heap = true;
    return o;
  }

  void MakeHeap(const HeapOptions& options) {
    auto h = GenerationalHeap::Make(options, &vm_);
    ASSERT_TRUE(h.ok()) << h.status();
    heap_ = std::move(*h);
    heap_->AttachMutator(&main_.mutator);
  }
  void SetUp() override { MakeHeap(SmallHeapOptions()); }
  // Replaces the fixture's heap with one made from SmallHeapOptions() as
  // `change` edits them, for a test that needs a setting of its own.
  template <typename F>
  void RemakeHeap(F&& change) {
    HeapOptions o = SmallHeapOptions();
    change(o);
    TearDown();
    MakeHeap(o);
  }
  void TearDown() override {
    if (heap_ != nullptr && main_.mutator.heap != nullptr) heap_->DetachMutator(&main_.mutator);
  }

  Mutator* m() { return &main_.mutator; }
  std::vector<Value>& roots() { return main_.roots; }
  // Adds a root and returns its index; objects are read back through roots
  // after a collection because they may have moved.
  size_t Root(Object* o) {
    main_.roots.push_back(Value::Ref(o));
    return main_.roots.size() - 1;
  }
  Object* R(size_t i) { return main_.roots[i].AsRef(); }

  // A list of n pairs (car = Int(i), cdr = next) rooted at the returned index.
  size_t MakeList(int n) {
    const size_t head = Root(nullptr);
    roots()[head] = Value::Null();
    for (int i = n - 1; i >= 0; --i) {
      Object* p = NewPair(m());
      EXPECT_NE(p, nullptr);
      p->fields()[0] = Value::Int(i);
      Store(m(), p, &p->fields()[1], roots()[head]);
      roots()[head] = Value::Ref(p);
    }
    return head;
  }
  void ExpectList(size_t head, int n) {
    Object* p = R(head);
    for (int i = 0; i < n; ++i) {
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(p->fields()[0].AsInt(), i);
      p = p->fields()[1].AsRef();
    }
    EXPECT_EQ(p, nullptr);
  }

  void Minor() { heap_->Collect(m(), GcCause::kExplicit, GenerationalHeap::GcKind::kMinor); }
  void Full() { heap_->CollectGarbage(m(), GcCause::kExplicit); }

  MockVm vm_;
  TestThread main_;
  std::unique_ptr<GenerationalHeap> heap_;
};

}  // namespace minivm::gc::testing

#endif  // MINIVM_TESTS_UNIT_GC_GC_TEST_UTIL_H_
