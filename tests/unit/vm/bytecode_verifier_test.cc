// The bytecode verifier (vm/bytecode/verifier.h) on hand-assembled code:
// what it accepts and the facts it computes, then one test per kind of
// malformed code it must refuse. The compiler's output is checked against
// it in tests/unit/compiler/compiler_test.cc.
#include "vm/bytecode/verifier.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/vm/program_builder.h"

namespace minivm::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Verifies the function `code` (no parameters, `locals` locals, at most
// `max_stack` operands) in a program that also has a one-field class, a
// global, a string and a two-argument function.
absl::StatusOr<VerifiedCode> Verify(const Asm& code, uint16_t locals = 1, uint16_t max_stack = 4) {
  ProgramBuilder pb;
  pb.AddClass("Box", {"v"});
  pb.AddGlobal("g");
  pb.AddString("s");
  Asm two;
  two.Load(0).Ret();
  pb.AddFunction("two", 2, 2, 1, two);
  const uint32_t fn = pb.AddFunction("f", 0, locals, max_stack, code);
  std::unique_ptr<Program> program = pb.Build();
  return VerifyFunction(*program, *program->functions[fn]);
}

std::string Error(const Asm& code, uint16_t locals = 1, uint16_t max_stack = 4) {
  absl::StatusOr<VerifiedCode> v = Verify(code, locals, max_stack);
  EXPECT_FALSE(v.ok());
  return v.ok() ? "" : std::string(v.status().message());
}

TEST(BytecodeVerifierTest, LoopFactsAreComputed) {
  // 0: PUSH_INT 0; 9: STORE 0; 12: LOAD 0; 15: JUMP_IF_FALSE end; 20: LOOP 12;
  // 25: NULL; 26: RET
  Asm a;
  a.Int(0).Store(0);
  const size_t head = a.here();
  a.Load(0);
  const size_t exit = a.Jump(Opcode::JUMP_IF_FALSE);
  a.Loop(head);
  a.Bind(exit);
  a.Null().Ret();
  absl::StatusOr<VerifiedCode> v = Verify(a);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(v->loop_headers, ElementsAre(12));
  EXPECT_EQ(v->depth[0], 0);
  EXPECT_EQ(v->depth[9], 1);
  EXPECT_EQ(v->depth[15], 1);
  EXPECT_EQ(v->depth[25], 0);
  EXPECT_TRUE(v->is_leader[0]);
  EXPECT_TRUE(v->is_leader[12]);
  EXPECT_TRUE(v->is_leader[20]);  // after the branch
  EXPECT_TRUE(v->is_leader[25]);  // its target
  EXPECT_FALSE(v->is_leader[9]);
  EXPECT_TRUE(v->is_start[26]);
  EXPECT_FALSE(v->is_start[1]);  // inside PUSH_INT's operand
}

TEST(BytecodeVerifierTest, UnreachableCodeHasNoDepth) {
  Asm a;
  a.Null().Ret().Int(1).Ret();
  absl::StatusOr<VerifiedCode> v = Verify(a);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->depth[2], VerifiedCode::kUnreachable);
}

TEST(BytecodeVerifierTest, VariableStackEffectsFollowTheArgc) {
  // NEW Box 0, then INIT_FIELDS Box 1 pops the object and its argument and
  // pushes the object: depth 2 -> 1.
  Asm a;
  a.New(0, 0).Int(5).Op(Opcode::INIT_FIELDS).U32(0).U8(1).Int(1).Int(2).Call(1, 2).Op(Opcode::ADD);
  a.Ret();
  absl::StatusOr<VerifiedCode> v = Verify(a);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->depth[15], 2);  // before INIT_FIELDS
  EXPECT_EQ(v->depth[21], 1);  // after it
}

TEST(BytecodeVerifierTest, RefusesInconsistentDepths) {
  EXPECT_THAT(Error(InconsistentDepthCode()), HasSubstr("inconsistent stack depth at"));
}

TEST(BytecodeVerifierTest, RefusesUnderflowAndOverflow) {
  Asm under;
  under.Op(Opcode::ADD).Ret();
  EXPECT_THAT(Error(under), HasSubstr("stack depth out of range at 0"));
  Asm over;
  over.Int(1).Int(2).Int(3).Op(Opcode::ADD).Op(Opcode::ADD).Ret();
  EXPECT_THAT(Error(over, 1, 2), HasSubstr("stack depth out of range at 18"));
  Asm init;  // INIT_FIELDS 1 needs the object below its argument
  init.Int(5).Op(Opcode::INIT_FIELDS).U32(0).U8(1).Ret();
  EXPECT_THAT(Error(init), HasSubstr("stack depth out of range at 9"));
}

TEST(BytecodeVerifierTest, RefusesBadEncodings) {
  EXPECT_EQ(Error(Asm()), "empty function");
  Asm bad;
  bad.U8(static_cast<uint8_t>(kNumOpcodes)).Ret();
  EXPECT_EQ(Error(bad), "invalid opcode");
  Asm truncated;
  truncated.Null().Op(Opcode::LOAD_LOCAL).U8(0);
  EXPECT_EQ(Error(truncated), "truncated instruction");
}

TEST(BytecodeVerifierTest, RefusesJumpsOutsideTheCodeOrIntoAnInstruction) {
  Asm out;
  out.Op(Opcode::JUMP).I32(100).Null().Ret();
  EXPECT_THAT(Error(out), HasSubstr("bad jump target 105"));
  Asm inside;
  inside.Op(Opcode::JUMP).I32(1).Int(1).Ret();
  EXPECT_THAT(Error(inside), HasSubstr("bad jump target 6"));
}

TEST(BytecodeVerifierTest, EveryBackwardJumpIsALoop) {
  // A backward JUMP would make a cycle without a safepoint poll.
  Asm back;
  back.Null().Op(Opcode::POP).Op(Opcode::JUMP).I32(-7).Null().Ret();
  EXPECT_THAT(Error(back), HasSubstr("offset 2: a jump backward must be a LOOP"));
  Asm self;
  self.Op(Opcode::JUMP).I32(-5).Null().Ret();
  EXPECT_THAT(Error(self), HasSubstr("offset 0: a jump backward must be a LOOP"));
  Asm forward;
  forward.Op(Opcode::LOOP).I32(0).Null().Ret();
  EXPECT_THAT(Error(forward), HasSubstr("offset 0: LOOP must jump backward"));
}

TEST(BytecodeVerifierTest, RefusesFallingOffTheEnd) {
  Asm a;
  a.Null();
  EXPECT_THAT(Error(a), HasSubstr("offset 0: control falls off the end"));
}

TEST(BytecodeVerifierTest, RefusesOperandsOutOfRange) {
  Asm str;
  str.Str(1).Ret();
  EXPECT_EQ(Error(str), "offset 0: bad string constant");
  Asm local;
  local.Load(1).Ret();
  EXPECT_EQ(Error(local), "offset 0: bad local");
  Asm global;
  global.LoadGlobal(1).Ret();
  EXPECT_EQ(Error(global), "offset 0: bad global");
  Asm cache;
  cache.Null().Op(Opcode::GET_FIELD).U32(0).U32(0).Ret();
  EXPECT_EQ(Error(cache), "offset 1: bad field cache");
  Asm arity;
  arity.Int(1).Call(1, 1).Ret();
  EXPECT_EQ(Error(arity), "offset 9: bad callee or argument count");
  Asm callee;
  callee.Call(9, 0).Ret();
  EXPECT_EQ(Error(callee), "offset 0: bad callee or argument count");
  Asm fields;
  fields.Int(1).Int(2).New(0, 2).Ret();
  EXPECT_EQ(Error(fields), "offset 18: bad class or argument count");
  Asm builtin;
  builtin.Op(Opcode::CALL_BUILTIN).U8(255).U8(0).Ret();
  EXPECT_EQ(Error(builtin), "offset 0: bad built-in");
}

}  // namespace
}  // namespace minivm::testing
