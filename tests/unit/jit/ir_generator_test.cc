// The code generator's driver (vm/jit/ir_generator.cc): a function's
// entries and the pass over its bytecode.
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/jit/compiled_ir.h"

namespace minivm::testing {
namespace {

// add(a, b) { return a + b; } and a counting loop in main, which calls add
// three times.
std::unique_ptr<Program> AddAndLoopProgram() {
  ProgramBuilder pb;
  Asm add;
  add.Load(0).Load(1).Op(Opcode::ADD).Ret();
  const uint32_t add_fn = pb.AddFunction("add", 2, 2, 2, add);
  Asm main;
  EmitCountingLoop(main, 0, 3, [add_fn](Asm& a) { a.Call(add_fn, 2); });
  return BuildWithMain(pb, main, 1, 2);
}

TEST(IrGeneratorTest, TheNormalEntryTakesTheArgumentsInRegisters) {
  // calls.cc .call.signature: (thread, frame, entry, arg0, arg1).
  const std::string ir = CompiledIr(AddAndLoopProgram(), IrTier::kQuick, "add");
  ASSERT_NE(ir.find("; --print-jit: add"), std::string::npos) << ir;
  EXPECT_TRUE(std::regex_search(
      ir, std::regex(R"(define i64 @[\w.]+\(ptr nonnull %thread, ptr nonnull %frame, )"
                     R"(i32 %entry, i64 %0, i64 %1\))")))
      << ir;
}

TEST(IrGeneratorTest, EachLoopHeaderHasAnOnStackReplacementEntry) {
  // .one-pass: entry 0 is the normal entry, entry h + 1 the loop header h's
  // OSR entry, which reloads the slots from home.
  const std::string ir = CompiledIr(AddAndLoopProgram(), IrTier::kOptimised, "main");
  ASSERT_NE(ir.find("; --print-jit: main"), std::string::npos) << ir;
  EXPECT_NE(ir.find("normal_entry:"), std::string::npos) << ir;
  EXPECT_NE(ir.find("osr_entry:"), std::string::npos) << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(switch i32 %entry, label %bad_entry \[\n)"
                                               R"(\s+i32 \d+, label %osr\d+\n\s+\])")))
      << ir;
}

}  // namespace
}  // namespace minivm::testing
