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
  const uint8_t add[] = {static_cast<uint8_t>(Opcode::ADD)};
  EXPECT_EQ(StackEffect(add), -1);
}

}  // namespace
}  // namespace minivm
