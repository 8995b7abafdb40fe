// The VM object: creation, roots it reports to the GC.
#include "vm/runtime/vm.h"

#include <memory>
#include <utility>
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

// A VM of pb's program plus a main that returns null, on an 8 MiB heap.
std::unique_ptr<VM> NullMainVm(ProgramBuilder& pb) {
  Asm m;
  m.Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 1, m));
  VmOptions options;
  options.heap.max_heap_bytes = size_t{8} << 20;
  options.exit_process = false;
  absl::StatusOr<std::unique_ptr<VM>> vm = VM::Create(pb.Build(), options);
  EXPECT_TRUE(vm.ok()) << vm.status();
  return vm.ok() ? *std::move(vm) : nullptr;
}

TEST(VmTest, GlobalRootsCoverGlobalsConstantsAndThreadResults) {
  ProgramBuilder pb;
  pb.AddGlobal("a");
  pb.AddGlobal("b");
  pb.AddString("s");
  std::unique_ptr<VM> vm = NullMainVm(pb);
  ASSERT_NE(vm, nullptr);
  CountingVisitor v;
  vm->VisitGlobalRoots(v);
  // 2 globals + 1 constant + main's result slot.
  EXPECT_EQ(v.slots.size(), 4u);
  EXPECT_EQ(v.slots[0], vm->globals());

  // A mutator's roots are exactly [stack_begin, sp).
  VMThread* t = vm->main_thread();
  t->sp = t->stack_begin + 3;
  CountingVisitor mv;
  vm->VisitMutatorRoots(&t->mutator, mv);
  ASSERT_EQ(mv.slots.size(), 3u);
  EXPECT_EQ(mv.slots[0], t->stack_begin);
  t->sp = t->stack_begin;
}

// Records each range with the root info it came with.
class InfoVisitor : public gc::RootVisitor {
 public:
  bool WantsRootInfo() const override { return true; }
  void SetRootInfo(const gc::RootInfo& info) override { info_ = info; }
  void VisitRoots(gc::Value* begin, gc::Value* end) override {
    for (gc::Value* p = begin; p < end; ++p) {
      slots.push_back(p);
      frame_slots.push_back(info_.slot + static_cast<int32_t>(p - begin));
      depths.push_back(info_.depth);
    }
  }
  std::vector<gc::Value*> slots;
  std::vector<int32_t> frame_slots;
  std::vector<int32_t> depths;

 private:
  gc::RootInfo info_;
};

// A frame's int mask (thread.h, 5.): compiled code at a call left those
// slots' homes unwritten, so the collector and heap walks must skip them,
// and only them, and still number the others by their frame slot.
TEST(VmTest, MutatorRootsSkipTheSlotsAFramesIntMaskNames) {
  ProgramBuilder pb;
  std::unique_ptr<VM> vm = NullMainVm(pb);
  ASSERT_NE(vm, nullptr);
  VMThread* t = vm->main_thread();
  const Function* fn = vm->program().functions[0].get();
  // Two frames: the outer at a call, its slots 1 and 3 left out (and bit 9,
  // past its slots, which must not hide the inner frame's); the inner one,
  // the top, without a mask.
  Frame* outer = t->frames_begin;
  Frame* inner = t->frames_begin + 1;
  outer->fn = inner->fn = fn;
  outer->base = t->stack_begin;
  inner->base = t->stack_begin + 5;
  outer->set_pc(fn->code.data());
  outer->pc_word |= uintptr_t{(1u << 1) | (1u << 3) | (1u << 9)} << Frame::kMaskShift;
  inner->set_pc(fn->code.data());
  ASSERT_EQ(outer->pc(), fn->code.data());
  ASSERT_EQ(outer->int_mask(), (1u << 1) | (1u << 3) | (1u << 9));
  Frame* const saved_fp = t->fp;
  t->fp = inner;
  t->sp = t->stack_begin + 8;

  CountingVisitor plain;
  vm->VisitMutatorRoots(&t->mutator, plain);
  const std::vector<gc::Value*> expected = {t->stack_begin,     t->stack_begin + 2,
                                            t->stack_begin + 4, t->stack_begin + 5,
                                            t->stack_begin + 6, t->stack_begin + 7};
  EXPECT_EQ(plain.slots, expected);

  InfoVisitor info;
  vm->VisitMutatorRoots(&t->mutator, info);
  EXPECT_EQ(info.slots, expected);
  EXPECT_EQ(info.frame_slots, (std::vector<int32_t>{0, 2, 4, 0, 1, 2}));
  EXPECT_EQ(info.depths, (std::vector<int32_t>{1, 1, 1, 0, 0, 0}));

  t->fp = saved_fp;
  t->sp = t->stack_begin;
}

TEST(VmTest, CreateRejectsImpossibleHeaps) {
  VmOptions options;
  options.heap.max_heap_bytes = 1024;
  EXPECT_FALSE(VM::Create(ReturnNullProgram(), options).ok());
}

}  // namespace
}  // namespace minivm::testing
