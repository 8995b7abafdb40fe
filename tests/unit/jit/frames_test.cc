// The int mask a call writes into its frame's pc word (vm/jit/frames.h),
// and where compiled code writes its frame (vm/jit/frames.cc).
#include "vm/jit/frames.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/unit/jit/compiled_ir.h"
#include "vm/runtime/thread.h"

namespace minivm::testing {
namespace {

jit::PathState Unknown(int slots) {
  jit::PathState p;
  p.Reset(slots);
  return p;
}

TEST(IntMaskTest, NamesProvenIntsUnderTheArgumentsThatAreNotHome) {
  jit::PathState p = Unknown(6);
  p.ProveInt(0);
  p.ProveInt(1);
  p.home[1] = true;  // home already: written, so not in the mask
  p.ProveInt(3);     // an argument (keep_from 3): passed in a register
  EXPECT_EQ(jit::IntMaskAtCall(p, /*n=*/5, /*keep_from=*/3), 0b1u);
  EXPECT_TRUE(jit::InMask(0b1u, 0));
  EXPECT_FALSE(jit::InMask(0b1u, 1));
}

TEST(IntMaskTest, CoversOnlyTheFirstMaskSlots) {
  const int slots = Frame::kMaskSlots + 4;
  jit::PathState p = Unknown(slots);
  for (int i = 0; i < slots; ++i) p.ProveInt(i);
  const uint32_t mask = jit::IntMaskAtCall(p, slots, slots);
  EXPECT_EQ(mask, (uint64_t{1} << Frame::kMaskSlots) - 1);
  EXPECT_FALSE(jit::InMask(~uint32_t{0}, Frame::kMaskSlots));
}

TEST(IntMaskTest, UnknownSlotsAreAlwaysWritten) {
  jit::PathState p = Unknown(4);
  EXPECT_EQ(jit::IntMaskAtCall(p, 4, 4), 0u);
}

// f(a) { return g(a + 1) + a; } g(x) { return x; }, main calls f 3 times.
std::unique_ptr<Program> CallProgram(uint32_t* f_fn) {
  ProgramBuilder pb;
  Asm g;
  g.Load(0).Ret();
  const uint32_t g_fn = pb.AddFunction("g", 1, 1, 1, g);
  Asm f;
  f.Load(0).Int(1).Op(Opcode::ADD).Call(g_fn, 1).Load(0).Op(Opcode::ADD).Ret();
  *f_fn = pb.AddFunction("f", 1, 1, 3, f);
  Asm main;
  for (int i = 0; i < 3; ++i) main.Int(i).Call(*f_fn, 1).Op(Opcode::POP);
  main.Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 2, main));
  return pb.Build();
}

TEST(FramesTest, OptimisedCodeChecksRoomOnceQuickCodeAtEverySite) {
  // .checks.once: optimised code tests the room the whole function needs
  // and hands a failed test to the interpreter; quick code has EnterFrame's
  // exact checks at the call, raising the overflow itself.
  uint32_t f_fn = 0;
  const std::string opt = CompiledIr(CallProgram(&f_fn), IrTier::kOptimised, "f");
  const std::string quick = CompiledIr(CallProgram(&f_fn), IrTier::kQuick, "f");
  ASSERT_NE(opt.find("; --print-jit: f"), std::string::npos) << opt;
  EXPECT_NE(opt.find("minivm_jit_continue_interpreted"), std::string::npos) << opt;
  EXPECT_EQ(opt.find("minivm_jit_stack_overflow"), std::string::npos) << opt;
  EXPECT_NE(quick.find("minivm_jit_stack_overflow"), std::string::npos) << quick;
  EXPECT_EQ(quick.find("minivm_jit_continue_interpreted"), std::string::npos) << quick;
}

TEST(FramesTest, OptimisedCodeReadsTheBaseAgainAfterACall) {
  // .frame.base: optimised code keeps the base in an alloca of its own and
  // stores a fresh load of frame->base into it after the call; quick code
  // keeps one value.
  uint32_t f_fn = 0;
  const std::string opt = CompiledIr(CallProgram(&f_fn), IrTier::kOptimised, "f");
  const std::string quick = CompiledIr(CallProgram(&f_fn), IrTier::kQuick, "f");
  ASSERT_NE(opt.find("; --print-jit: f"), std::string::npos) << opt;
  EXPECT_NE(opt.find("alloca ptr"), std::string::npos) << opt;
  EXPECT_EQ(quick.find("alloca ptr"), std::string::npos) << quick;
}

}  // namespace
}  // namespace minivm::testing
