// Allocation in compiled code (vm/jit/allocation.h, allocation.cc): which
// fields the TLAB fast path leaves to INIT_FIELDS, and the fast path itself.
#include "vm/jit/allocation.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/unit/jit/compiled_ir.h"
#include "vm/bytecode/verifier.h"

namespace minivm::testing {
namespace {

struct Filled : ::testing::Test {
  ProgramBuilder pb;
  uint32_t pair = pb.AddClass("Pair", {"a", "b"});
  std::unique_ptr<Program> program;

  // The fields the NEW at offset 0 of `code` need not zero.
  uint64_t Of(const Asm& code, uint16_t locals = 1) {
    const uint32_t fn = pb.AddFunction("f", 0, locals, 4, code);
    program = pb.Build();
    absl::StatusOr<VerifiedCode> verified = VerifyFunction(*program, *program->functions[fn]);
    EXPECT_TRUE(verified.ok()) << verified.status();
    return jit::FilledBeforeAnyGcPoint(*program->functions[fn], *verified, 0);
  }
};

Asm& InitFields(Asm& a, uint32_t cls, uint8_t argc) {
  return a.Op(Opcode::INIT_FIELDS).U32(cls).U8(argc);
}

TEST_F(Filled, ConstantsAndVariablesNeedNoZeroing) {
  Asm a;
  a.New(pair, 0).Null().Load(0);
  InitFields(a, pair, 2).Ret();
  EXPECT_EQ(Of(a), 2u);
}

TEST_F(Filled, ACallBetweenNewAndItsStoresNeedsZeroedFields) {
  Asm a;
  a.New(pair, 0).Null().Builtin(Builtin::k_nanotime, 0);
  InitFields(a, pair, 2).Ret();
  EXPECT_EQ(Of(a), 0u);
}

// main calls make() { return new Pair(null, null); } three times.
std::unique_ptr<Program> NewProgram() {
  ProgramBuilder pb;
  const uint32_t pair = pb.AddClass("Pair", {"a", "b"});
  Asm make;
  make.New(pair, 0).Null().Null();
  InitFields(make, pair, 2).Ret();
  const uint32_t make_fn = pb.AddFunction("make", 0, 0, 3, make);
  Asm main;
  for (int i = 0; i < 3; ++i) main.Call(make_fn, 0).Op(Opcode::POP);
  main.Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 1, main));
  return pb.Build();
}

TEST(AllocationIrTest, NewBumpsTheTlabInlineWithTheRuntimeOnlyOnTheSlowPath) {
  // .alloc.tlab in both tiers: the bump, and minivm_jit_new on the slow
  // path; nothing about sampling.
  for (IrTier tier : {IrTier::kQuick, IrTier::kOptimised}) {
    const std::string ir = CompiledIr(NewProgram(), tier, "make");
    ASSERT_NE(ir.find("; --print-jit: make"), std::string::npos) << ir;
    EXPECT_NE(ir.find("icmp ugt i64"), std::string::npos) << ir;
    EXPECT_NE(ir.find("@minivm_jit_new("), std::string::npos) << ir;
    EXPECT_EQ(ir.find("sampl"), std::string::npos) << ir;
  }
}

TEST(AllocationIrTest, FieldsInitialisedBeforeAnyGcPointAreNotZeroed) {
  // .alloc.zeroing: both fields come from constants, so only the gc_word
  // is zeroed on the fast path: one 8-byte memset, none of the body.
  const std::string ir = CompiledIr(NewProgram(), IrTier::kOptimised, "make");
  EXPECT_EQ(Count(ir, "call void @llvm.memset"), 1) << ir;
  EXPECT_NE(ir.find("i8 0, i64 8, i1 false)"), std::string::npos) << ir;
}

}  // namespace
}  // namespace minivm::testing
