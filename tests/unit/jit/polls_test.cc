// Safepoint polls and tier-up in compiled code (vm/jit/polls.h, polls.cc).
#include "vm/jit/polls.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/unit/jit/compiled_ir.h"

namespace minivm::testing {
namespace {

TEST(PollPlacementTest, QuickCodePollsAtEveryCallOptimisedAtTheFirstOnAPath) {
  EXPECT_TRUE(jit::PollsAtCall(/*optimising=*/false, /*path_polled=*/false));
  EXPECT_TRUE(jit::PollsAtCall(/*optimising=*/false, /*path_polled=*/true));
  EXPECT_TRUE(jit::PollsAtCall(/*optimising=*/true, /*path_polled=*/false));
  EXPECT_FALSE(jit::PollsAtCall(/*optimising=*/true, /*path_polled=*/true));
  EXPECT_TRUE(jit::PollsAtBackEdge());
}

// main: i = 0; while (i < 100) i = i + 1; return.
std::unique_ptr<Program> LoopProgram() {
  ProgramBuilder pb;
  Asm main;
  EmitCountingLoop(main, 0, 100);
  return BuildWithMain(pb, main, 1, 2);
}

TEST(PollIrTest, TheBackEdgePollsAndQuickCodeCountsHotness) {
  // .poll.where: the loop's back-edge polls (entry does not: no call in
  // main, so the one poll is the back-edge's). .tier-up: quick code counts
  // at entry and at the back-edge and calls minivm_jit_hot when hot.
  const std::string ir = CompiledIr(LoopProgram(), IrTier::kQuick, "main");
  ASSERT_NE(ir.find("; --print-jit: main"), std::string::npos) << ir;
  EXPECT_EQ(Count(ir, "call void @minivm_jit_poll("), 1) << ir;
  EXPECT_EQ(Count(ir, "@minivm_jit_hot("), 2) << ir;
}

// twice(x) { return id(x) + id(x); } with id a loop (so not inlined).
std::unique_ptr<Program> TwoCallsProgram() {
  ProgramBuilder pb;
  Asm id;
  EmitCountingLoop(id, 1, 1);
  id.Load(0).Ret();
  const uint32_t id_fn = pb.AddFunction("id", 1, 2, 2, id);
  Asm twice;
  twice.Load(0).Call(id_fn, 1).Load(0).Call(id_fn, 1).Op(Opcode::ADD).Ret();
  return BuildWithMain(pb, CallsWithInts(pb.AddFunction("twice", 1, 1, 2, twice)), 0, 2);
}

TEST(PollIrTest, OptimisedCodePollsOnlyAtTheFirstCallOnAPath) {
  // .poll.once: the second call follows the first on every path.
  const std::string opt = CompiledIr(TwoCallsProgram(), IrTier::kOptimised, "twice");
  ASSERT_NE(opt.find("; --print-jit: twice"), std::string::npos) << opt;
  EXPECT_EQ(Count(opt, "call void @minivm_jit_poll("), 1) << opt;
  EXPECT_EQ(opt.find("@minivm_jit_hot("), std::string::npos) << opt;  // no tier-up code
  const std::string quick = CompiledIr(TwoCallsProgram(), IrTier::kQuick, "twice");
  EXPECT_EQ(Count(quick, "call void @minivm_jit_poll("), 2) << quick;
}

}  // namespace
}  // namespace minivm::testing
