#include "vm/bytecode/opcodes.h"

namespace minivm {
namespace {

constexpr uint8_t OperandSize(OperandKind k) {
  switch (k) {
    case OperandKind::kU8:
      return 1;
    case OperandKind::kU16:
      return 2;
    case OperandKind::kU32:
    case OperandKind::kI32:
      return 4;
    case OperandKind::kV64:
      return 8;
  }
  return 0;
}

template <size_t N>
constexpr OpcodeInfo MakeInfo(std::string_view name, const OperandKind (&ops)[N],
                              bool variable, int effect) {
  OpcodeInfo info{name, static_cast<uint8_t>(N), {OperandKind::kU8, OperandKind::kU8},
                  1, variable, static_cast<int8_t>(effect)};
  for (size_t i = 0; i < N; ++i) {
    info.operands[i] = ops[i];
    info.length = static_cast<uint8_t>(info.length + OperandSize(ops[i]));
  }
  return info;
}
constexpr OpcodeInfo MakeInfo(std::string_view name, bool variable, int effect) {
  return OpcodeInfo{name, 0, {OperandKind::kU8, OperandKind::kU8}, 1, variable,
                    static_cast<int8_t>(effect)};
}

// Expands an operand list such as (kU32, kU8) into an argument list.
#define MINIVM_OPERANDS_ARG(...) __VA_OPT__({__VA_ARGS__},)
#define MINIVM_UNPAREN(...) __VA_ARGS__

using enum OperandKind;
constexpr int VAR = 1000;  // marker: the effect depends on argc

constexpr OpcodeInfo kInfos[] = {
#define MINIVM_OPCODE_INFO(name, operands, effect, doc)                    \
  MakeInfo(#name, MINIVM_OPERANDS_ARG operands(effect) == VAR,             \
           (effect) == VAR ? 0 : (effect)),
    MINIVM_OPCODES(MINIVM_OPCODE_INFO)
#undef MINIVM_OPCODE_INFO
};
static_assert(sizeof(kInfos) / sizeof(kInfos[0]) == kNumOpcodes);

}  // namespace

const OpcodeInfo& GetOpcodeInfo(Opcode op) {
  return kInfos[static_cast<uint8_t>(op)];
}

int StackEffect(const uint8_t* pc) {
  const OpcodeInfo& info = GetOpcodeInfo(static_cast<Opcode>(*pc));
  if (!info.variable_effect) return info.stack_effect;
  // Every variable-effect instruction is (id, u8 argc); all but INIT_FIELDS
  // push one result, INIT_FIELDS leaves its object where it was.
  const int argc = pc[info.length - 1];
  if (static_cast<Opcode>(*pc) == Opcode::INIT_FIELDS) return -argc;
  return 1 - argc;
}

}  // namespace minivm
