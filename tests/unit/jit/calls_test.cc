// Calls in compiled code (vm/jit/calls.cc): inlining, the entries, and what
// a recursive function's calls return.
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/jit/compiled_ir.h"

namespace minivm::testing {
namespace {

// f(a) { return g(a) + 1; } g(x) { return x; }; main calls f three times.
std::unique_ptr<Program> LeafCallProgram() {
  ProgramBuilder pb;
  Asm g;
  g.Load(0).Ret();
  const uint32_t g_fn = pb.AddFunction("g", 1, 1, 1, g);
  Asm f;
  f.Load(0).Call(g_fn, 1).Int(1).Op(Opcode::ADD).Ret();
  return BuildWithMain(pb, CallsWithInts(pb.AddFunction("f", 1, 1, 2, f)), 0, 2);
}

TEST(CallsIrTest, OptimisedCodeInlinesASmallLeafQuickCodeCallsIt) {
  // .inline: no real call of g in optimised f (no load of a jit entry, no
  // interpreter fallback); quick f calls g through jit_code.
  const std::string opt = CompiledIr(LeafCallProgram(), IrTier::kOptimised, "f");
  ASSERT_NE(opt.find("; --print-jit: f"), std::string::npos) << opt;
  EXPECT_EQ(opt.find("minivm_jit_call_interpreted"), std::string::npos) << opt;
  EXPECT_NE(opt.find("inline_done"), std::string::npos) << opt;
  const std::string quick = CompiledIr(LeafCallProgram(), IrTier::kQuick, "f");
  EXPECT_NE(quick.find("minivm_jit_call_interpreted"), std::string::npos) << quick;
  EXPECT_EQ(quick.find("inline_done"), std::string::npos) << quick;
}

TEST(CallsIrTest, OptimisedCodeHasItsOwnConventionQuickCodeC) {
  // .call.convention: preserve_none on x86-64, the C convention elsewhere.
  const std::string opt = CompiledIr(LeafCallProgram(), IrTier::kOptimised, "f");
  const std::string quick = CompiledIr(LeafCallProgram(), IrTier::kQuick, "f");
#if defined(__x86_64__)
  EXPECT_NE(opt.find("define preserve_nonecc i64 @"), std::string::npos) << opt;
#endif
  EXPECT_EQ(quick.find("preserve_nonecc"), std::string::npos) << quick;
}

// down(n) { if (n < 1) return 0; return down(n - 1) + 1; } (ints), and
// obj(n) { if (n < 1) return null; return obj(n - 1); } (not ints).
std::unique_ptr<Program> RecursiveProgram() {
  ProgramBuilder pb;
  const uint32_t down_fn = pb.AddFunction("down", 1, 1, 2, Asm().Null().Ret());
  Asm down;
  down.Load(0).Int(1).Op(Opcode::LT);
  size_t recurse = down.Jump(Opcode::JUMP_IF_FALSE);
  down.Int(0).Ret();
  down.Bind(recurse);
  down.Load(0).Int(1).Op(Opcode::SUB).Call(down_fn, 1).Int(1).Op(Opcode::ADD).Ret();
  pb.SetCode(down_fn, down);
  const uint32_t obj_fn = pb.AddFunction("obj", 1, 1, 2, Asm().Null().Ret());
  Asm obj;
  obj.Load(0).Int(1).Op(Opcode::LT);
  recurse = obj.Jump(Opcode::JUMP_IF_FALSE);
  obj.Null().Ret();
  obj.Bind(recurse);
  obj.Load(0).Int(1).Op(Opcode::SUB).Call(obj_fn, 1).Ret();
  pb.SetCode(obj_fn, obj);
  Asm main;
  for (int i = 0; i < 3; ++i) main.Int(10).Call(down_fn, 1).Op(Opcode::POP);
  for (int i = 0; i < 3; ++i) main.Int(10).Call(obj_fn, 1).Op(Opcode::POP);
  return BuildWithMain(pb, main, 0, 2);
}

TEST(CallsIrTest, ASelfCallProvenToReturnIntsAddsWithoutATagTest) {
  // .return.self-int: down's every RETURN returns a proven int, so its
  // self calls' + 1 is the fast path alone (no slow path of ADD); obj
  // returns null, so it is emitted again without the assumption and still
  // compiles.
  const std::string down = CompiledIr(RecursiveProgram(), IrTier::kOptimised, "down");
  ASSERT_NE(down.find("; --print-jit: down"), std::string::npos) << down;
  // One slow path in all: the entry's `n < 1`, before n is known to be an
  // int; the inlined copies get n - 1 as a proven int, and no + 1 tests.
  EXPECT_EQ(Count(down, "@minivm_jit_binary("), 1) << down;
  const std::string obj = CompiledIr(RecursiveProgram(), IrTier::kOptimised, "obj");
  ASSERT_NE(obj.find("; --print-jit: obj"), std::string::npos) << obj;
}

}  // namespace
}  // namespace minivm::testing
