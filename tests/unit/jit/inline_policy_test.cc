// Which calls the optimising tier inlines (vm/jit/inline_policy.h).
#include "vm/jit/inline_policy.h"

#include <memory>

#include "gtest/gtest.h"
#include "tests/unit/vm/program_builder.h"

namespace minivm::testing {
namespace {

using jit::InlineSite;
using jit::ShouldInline;

// A function of `bytes` (even) bytes of bytecode: PUSH_NULL, then
// POP, PUSH_NULL pairs, then RETURN, each one byte.
Asm CodeOfSize(size_t bytes) {
  Asm a;
  a.Null();
  while (a.here() + 3 <= bytes) a.Op(Opcode::POP).Null();
  return a.Ret();
}

struct Policy : ::testing::Test {
  ProgramBuilder pb;
  std::unique_ptr<Program> program;
  const Function& Fn(uint32_t index) { return *program->functions[index]; }
};

TEST_F(Policy, ASmallLeafInlinesInTheOptimisingTierOnly) {
  const uint32_t leaf = pb.AddFunction("leaf", 0, 0, 1, CodeOfSize(10));
  program = pb.Build();
  EXPECT_TRUE(ShouldInline(*program, Fn(leaf), InlineSite{}));
  InlineSite quick;
  quick.optimising = false;
  EXPECT_FALSE(ShouldInline(*program, Fn(leaf), quick));
}

TEST_F(Policy, SizeLimitIsLargerForAFunctionInsideItself) {
  const uint32_t at_limit = pb.AddFunction("at", 0, 0, 1, CodeOfSize(jit::kMaxInlineBytecode));
  const uint32_t above = pb.AddFunction("above", 0, 0, 1, CodeOfSize(jit::kMaxInlineBytecode + 2));
  program = pb.Build();
  ASSERT_EQ(Fn(at_limit).code.size(), jit::kMaxInlineBytecode);
  ASSERT_GT(Fn(above).code.size(), jit::kMaxInlineBytecode);
  ASSERT_LE(Fn(above).code.size(), jit::kMaxRecursiveInlineBytecode);
  EXPECT_TRUE(ShouldInline(*program, Fn(at_limit), InlineSite{}));
  EXPECT_FALSE(ShouldInline(*program, Fn(above), InlineSite{}));
  InlineSite self;
  self.self = true;
  self.copies = 1;  // the function's own body
  EXPECT_TRUE(ShouldInline(*program, Fn(above), self));
}

TEST_F(Policy, BudgetDepthAndRecursionLevelsBound) {
  const uint32_t leaf = pb.AddFunction("leaf", 0, 0, 1, CodeOfSize(10));
  program = pb.Build();
  const size_t size = Fn(leaf).code.size();
  InlineSite site;
  site.inlined_bytes = jit::kInlineBudget - size;
  EXPECT_TRUE(ShouldInline(*program, Fn(leaf), site));
  site.inlined_bytes = jit::kInlineBudget - size + 1;
  EXPECT_FALSE(ShouldInline(*program, Fn(leaf), site));

  site = InlineSite{};
  site.depth = jit::kMaxInlineDepth - 1;
  EXPECT_TRUE(ShouldInline(*program, Fn(leaf), site));
  site.depth = jit::kMaxInlineDepth;
  EXPECT_FALSE(ShouldInline(*program, Fn(leaf), site));

  site = InlineSite{};
  site.self = true;
  site.copies = jit::kMaxRecursiveInlineLevel;
  EXPECT_TRUE(ShouldInline(*program, Fn(leaf), site));
  site.copies = jit::kMaxRecursiveInlineLevel + 1;
  EXPECT_FALSE(ShouldInline(*program, Fn(leaf), site));
}

TEST_F(Policy, LoopsAndSpawnsAreNeverInlined) {
  Asm loop;
  const size_t head = loop.here();
  loop.Null().Op(Opcode::POP).Loop(head);
  const uint32_t looping = pb.AddFunction("loops", 0, 0, 1, loop);
  const uint32_t leaf = pb.AddFunction("leaf", 0, 0, 1, CodeOfSize(4));
  Asm spawn;
  spawn.Spawn(leaf, 0).Ret();
  const uint32_t spawning = pb.AddFunction("spawns", 0, 0, 1, spawn);
  program = pb.Build();
  EXPECT_EQ(jit::CallsOfLoopFree(Fn(looping)), std::nullopt);
  EXPECT_EQ(jit::CallsOfLoopFree(Fn(spawning)), std::nullopt);
  EXPECT_FALSE(jit::IsSmallLeaf(Fn(looping)));
  EXPECT_FALSE(ShouldInline(*program, Fn(spawning), InlineSite{}));
}

TEST_F(Policy, ACalleeInlinesOnlyIfWhatItCallsIsASmallLeaf) {
  const uint32_t leaf = pb.AddFunction("leaf", 0, 0, 1, CodeOfSize(4));
  Asm calls_leaf;
  calls_leaf.Call(leaf, 0).Ret();
  const uint32_t middle = pb.AddFunction("middle", 0, 0, 1, calls_leaf);
  Asm calls_middle;
  calls_middle.Call(middle, 0).Ret();
  const uint32_t outer = pb.AddFunction("outer", 0, 0, 1, calls_middle);
  program = pb.Build();
  ASSERT_EQ(jit::CallsOfLoopFree(Fn(middle)), std::vector<uint32_t>{leaf});
  EXPECT_TRUE(jit::IsSmallLeaf(Fn(leaf)));
  EXPECT_FALSE(jit::IsSmallLeaf(Fn(middle)));
  EXPECT_TRUE(ShouldInline(*program, Fn(middle), InlineSite{}));
  EXPECT_FALSE(ShouldInline(*program, Fn(outer), InlineSite{}));
  // A recursive function's copy of itself need not call only leaves.
  InlineSite self;
  self.self = true;
  self.copies = 1;
  EXPECT_TRUE(ShouldInline(*program, Fn(outer), self));
}

TEST_F(Policy, CodeTheVerifierRefusesIsCalledNotInlined) {
  Asm bad;
  bad.Load(5).Ret();  // local 5 of a function with none
  const uint32_t refused = pb.AddFunction("bad", 0, 0, 1, bad);
  program = pb.Build();
  EXPECT_FALSE(ShouldInline(*program, Fn(refused), InlineSite{}));
}

}  // namespace
}  // namespace minivm::testing
