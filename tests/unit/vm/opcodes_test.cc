#include "vm/bytecode/opcodes.h"

#include "gtest/gtest.h"

namespace minivm {
namespace {

TEST(OpcodesTest, LengthsFollowOperands) {
  EXPECT_EQ(GetOpcodeInfo(Opcode::PUSH_INT).length, 9);
  EXPECT_EQ(GetOpcodeInfo(Opcode::POP).length, 1);
  EXPECT_EQ(GetOpcodeInfo(Opcode::GET_FIELD).length, 9);
  EXPECT_EQ(GetOpcodeInfo(Opcode::CALL).length, 6);
  EXPECT_EQ(GetOpcodeInfo(Opcode::LOAD_LOCAL).length, 3);
  EXPECT_EQ(GetOpcodeInfo(Opcode::RETURN).name, "RETURN");
}

TEST(OpcodesTest, VariableStackEffectUsesArgc) {
  const uint8_t call[] = {static_cast<uint8_t>(Opcode::CALL), 7, 0, 0, 0, 3};
  EXPECT_EQ(StackEffect(call), -2);
  EXPECT_EQ(PopCount(call), 3);
  EXPECT_EQ(PushCount(call), 1);
  const uint8_t add[] = {static_cast<uint8_t>(Opcode::ADD)};
  EXPECT_EQ(StackEffect(add), -1);
  EXPECT_EQ(PopCount(add), 2);
}

// INIT_FIELDS pops its arguments and the object below them, and pushes the
// object back: the JIT reads the object at depth - argc - 1.
TEST(OpcodesTest, InitFieldsPopsTheObjectToo) {
  const uint8_t init[] = {static_cast<uint8_t>(Opcode::INIT_FIELDS), 0, 0, 0, 0, 2};
  EXPECT_EQ(PopCount(init), 3);
  EXPECT_EQ(PushCount(init), 1);
  EXPECT_EQ(StackEffect(init), -2);
  EXPECT_EQ(ArgcOperand(init), 2);
}

TEST(OpcodesTest, BuiltinArgcIsItsSecondOperand) {
  const uint8_t builtin[] = {static_cast<uint8_t>(Opcode::CALL_BUILTIN), 9, 4};
  EXPECT_EQ(ArgcOperand(builtin), 4);
  EXPECT_EQ(StackEffect(builtin), -3);
}

// Lengths are compile-time facts (the interpreter's dispatch relies on it).
static_assert(OpcodeLength(Opcode::PUSH_INT) == 9);
static_assert(OpcodeLength(Opcode::JUMP) == 5);

}  // namespace
}  // namespace minivm
