// The VM object: creation, roots it reports to the collector.
#include "vm/runtime/vm.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/vm/program_builder.h"

namespace minivm::testing {
namespace {

class CountingVisitor : public gc::RootVisitor {
 public:
  void VisitRoots(gc::Value* begin, gc::Value* end) override {
    for (gc::Value* p = begin; p < end; ++p) slots.push_back(p);
  }
  std::vector<gc::Value*> slots;
};

TEST(VmTest, GlobalRootsCoverGlobalsConstantsAndThreadResults) {
  ProgramBuilder pb;
  pb.AddGlobal("a");
  pb.AddGlobal("b");
  pb.AddString("s");
  Asm m;
  m.Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 1, m));
  VmOptions options;
  options.heap.max_heap_bytes = size_t{8} << 20;
  options.exit_process = false;
  auto vm = VM::Create(pb.Build(), options);
  ASSERT_TRUE(vm.ok()) << vm.status();
  CountingVisitor v;
  (*vm)->VisitGlobalRoots(v);
  // 2 globals + 1 constant + main's result slot.
  EXPECT_EQ(v.slots.size(), 4u);
  EXPECT_EQ(v.slots[0], (*vm)->globals());

  // A mutator's roots are exactly [stack_begin, sp).
  VMThread* t = (*vm)->main_thread();
  t->sp = t->stack_begin + 3;
  CountingVisitor mv;
  (*vm)->VisitMutatorRoots(&t->mutator, mv);
  ASSERT_EQ(mv.slots.size(), 3u);
  EXPECT_EQ(mv.slots[0], t->stack_begin);
  t->sp = t->stack_begin;
}

TEST(VmTest, CreateRejectsImpossibleHeaps) {
  VmOptions options;
  options.heap.max_heap_bytes = 1024;
  EXPECT_FALSE(VM::Create(ReturnNullProgram(), options).ok());
}

}  // namespace
}  // namespace minivm::testing
