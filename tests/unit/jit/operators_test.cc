// Operators in compiled code (vm/jit/operators.cc).
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/jit/compiled_ir.h"

namespace minivm::testing {
namespace {

// f(a) { return (a * 2) - (a * 3); } and the same on two constants;
// main calls f three times.
std::unique_ptr<Program> MulSubProgram(bool constants) {
  ProgramBuilder pb;
  Asm f;
  if (constants) {
    f.Int(4).Int(2).Op(Opcode::MUL).Int(3).Op(Opcode::SUB).Ret();
  } else {
    f.Load(0).Int(2).Op(Opcode::MUL).Load(0).Int(3).Op(Opcode::MUL).Op(Opcode::SUB).Ret();
  }
  return BuildWithMain(pb, CallsWithInts(pb.AddFunction("f", 1, 1, 3, f)), 0, 2);
}

TEST(OperatorsIrTest, OperatorsOnProvenIntsAreTheirFastPathAlone) {
  // .op.proven: constants are ints, so are the results of MUL and SUB.
  const std::string ir = CompiledIr(MulSubProgram(/*constants=*/true), IrTier::kQuick, "f");
  ASSERT_NE(ir.find("; --print-jit: f"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("binary_slow"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("@minivm_jit_binary("), std::string::npos) << ir;
}

TEST(OperatorsIrTest, ARaiseOnlySlowPathReturnsAndTheRestAreProven) {
  // .op.raise-only: a's first MUL tests a (its slow path raises and
  // returns); after it a is a proven int, so the second MUL and the SUB
  // need no test: one slow path in all, which returns the error.
  const std::string ir = CompiledIr(MulSubProgram(/*constants=*/false), IrTier::kQuick, "f");
  ASSERT_NE(ir.find("; --print-jit: f"), std::string::npos) << ir;
  EXPECT_EQ(Count(ir, "@minivm_jit_binary("), 1) << ir;
  EXPECT_NE(ir.find("ret i64 2"), std::string::npos) << ir;  // the error sentinel
}

}  // namespace
}  // namespace minivm::testing
