// The bytecode instruction set, defined once.
//
// Encoding: one opcode byte, then the operands listed for it, each
// little-endian and unaligned (read with memcpy): u8, u16, u32, i32, or v64
// (the 64 raw bits of a gc::Value). Jump offsets (i32) are relative to the
// first byte of the *next* instruction.
//
// The machine is a stack machine over Values. A frame's slots are
//   [ base, base + arity )                 parameters
//   [ base + arity, base + num_locals )    other locals, null at entry
//   [ base + num_locals, ... )             the operand stack, at most max_stack deep
// Locals are addressed by slot index from base.
//
// X(NAME, operands, pops, pushes, description)
//
// pops and pushes count the operand-stack values the instruction consumes
// and produces. pops is a constant or `ARGC + k`: the instruction's argument
// count, its last operand (always a u8), plus k. Every user (the compiler's
// depth accounting, the verifier, the interpreter's lengths, the JIT) reads
// lengths and stack effects from here, through kOpcodeInfos.
#ifndef MINIVM_VM_BYTECODE_OPCODES_H_
#define MINIVM_VM_BYTECODE_OPCODES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace minivm {

enum class OperandKind : uint8_t { kU8, kU16, kU32, kI32, kV64 };

// clang-format off
#define MINIVM_OPCODES(X)                                                      \
  /* constants */                                                              \
  X(PUSH_INT,      (kV64),       0,        1, "push the Value whose bits are the operand (always an int)") \
  X(PUSH_NULL,     (),           0,        1, "push null")                               \
  X(PUSH_STRING,   (kU32),       0,        1, "push the program's string constant #u32 (a heap String)") \
  X(POP,           (),           1,        0, "discard the top of stack")                \
  /* variables */                                                              \
  X(LOAD_LOCAL,    (kU16),       0,        1, "push local slot #u16")                    \
  X(STORE_LOCAL,   (kU16),       1,        0, "pop into local slot #u16")                \
  X(LOAD_GLOBAL,   (kU32),       0,        1, "push global #u32")                        \
  X(STORE_GLOBAL,  (kU32),       1,        0, "pop into global #u32")                    \
  /* objects: field operands are (symbol u32, inline cache index u32) */       \
  X(GET_FIELD,     (kU32, kU32), 1,        1, "[obj] -> [obj.field]; null: null dereference; no such field: unknown field") \
  X(SET_FIELD,     (kU32, kU32), 2,        0, "[obj, v] -> []; obj.field = v")           \
  X(GET_INDEX,     (),           2,        1, "[obj, i] -> [obj[i]] for Array, Bytes, String") \
  X(SET_INDEX,     (),           3,        0, "[obj, i, v] -> []; obj[i] = v for Array, Bytes (0..255)") \
  /* arithmetic and comparison: [a, b] -> [a op b] */                          \
  X(ADD,           (),           2,        1, "int + int (wraps at 63 bits), String + String concatenates") \
  X(SUB,           (),           2,        1, "int - int")                               \
  X(MUL,           (),           2,        1, "int * int")                               \
  X(DIV,           (),           2,        1, "int / int, truncating; b == 0: division by zero") \
  X(MOD,           (),           2,        1, "int % int, sign of a; b == 0: division by zero") \
  X(EQ,            (),           2,        1, "1 if equal (ints by value, Strings by contents, else identity) else 0") \
  X(NE,            (),           2,        1, "negation of EQ")                          \
  X(LT,            (),           2,        1, "int < int -> 1 or 0")                     \
  X(LE,            (),           2,        1, "int <= int")                              \
  X(GT,            (),           2,        1, "int > int")                               \
  X(GE,            (),           2,        1, "int >= int")                              \
  /* bitwise, ints only (docs/language.md): shift counts are taken & 63 */    \
  X(BIT_AND,       (),           2,        1, "int & int")                               \
  X(BIT_OR,        (),           2,        1, "int | int")                               \
  X(BIT_XOR,       (),           2,        1, "int ^ int")                               \
  X(SHL,           (),           2,        1, "a << (b & 63), wrapping at 63 bits")      \
  X(SHR,           (),           2,        1, "a >> (b & 63), arithmetic (sign-filling)") \
  X(NEG,           (),           1,        1, "[a] -> [-a] for ints")                    \
  X(BIT_NOT,       (),           1,        1, "[a] -> [~a] for ints")                    \
  X(NOT,           (),           1,        1, "[a] -> [1 if a is falsy else 0]")         \
  /* control flow */                                                           \
  X(JUMP,          (kI32),       0,        0, "forward jump")                            \
  X(JUMP_IF_FALSE, (kI32),       1,        0, "pop; jump if falsy (null or 0)")          \
  X(LOOP,          (kI32),       0,        0, "backward jump (negative offset); a safepoint poll site") \
  /* calls */                                                                  \
  X(CALL,          (kU32, kU8),  ARGC,     1, "call function #u32 with u8 args (== its arity); a poll site") \
  X(CALL_BUILTIN,  (kU8, kU8),   ARGC,     1, "call built-in #u8 with u8 args") \
  X(NEW,           (kU32, kU8),  ARGC,     1, "new instance of class #u32; u8 args fill the first fields") \
  X(INIT_FIELDS,   (kU32, kU8),  ARGC + 1, 1, "[obj, a1..an] -> [obj]: obj (a fresh #u32) gets fields 0..n-1 = a1..an, n = u8") \
  X(SPAWN,         (kU32, kU8),  ARGC,     1, "start function #u32 with u8 args on a new thread; push the Thread") \
  X(RETURN,        (),           1,        0, "pop the result; drop the frame; push the result in the caller")
// clang-format on

enum class Opcode : uint8_t {
#define MINIVM_OPCODE_ENUM(name, operands, pops, pushes, doc) name,
  MINIVM_OPCODES(MINIVM_OPCODE_ENUM)
#undef MINIVM_OPCODE_ENUM
};

struct OpcodeInfo {
  std::string_view name;
  uint8_t num_operands;
  OperandKind operands[2];
  uint8_t length;  // bytes, opcode included
  uint8_t pops;    // values popped, plus the argc operand when pops_argc
  bool pops_argc;  // argc is then the last operand, a u8 (checked below)
  uint8_t pushes;  // values pushed
};

// Bytes of an operand.
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

namespace opcodes_internal {

// The pops column: an int, ARGC or ARGC + k.
struct PopSpec {
  int fixed;
  bool plus_argc;
};
struct ArgcToken {
  constexpr operator PopSpec() const { return {0, true}; }  // NOLINT: table syntax
  constexpr PopSpec operator+(int k) const { return {k, true}; }
};
inline constexpr ArgcToken ARGC{};
constexpr PopSpec ToPopSpec(PopSpec p) { return p; }
constexpr PopSpec ToPopSpec(int n) { return {n, false}; }

template <size_t N>
constexpr OpcodeInfo MakeInfo(std::string_view name, const OperandKind (&ops)[N], PopSpec pops,
                              int pushes) {
  OpcodeInfo info{name,           static_cast<uint8_t>(N), {OperandKind::kU8, OperandKind::kU8},
                  1,              static_cast<uint8_t>(pops.fixed), pops.plus_argc,
                  static_cast<uint8_t>(pushes)};
  for (size_t i = 0; i < N; ++i) {
    info.operands[i] = ops[i];
    info.length = static_cast<uint8_t>(info.length + OperandSize(ops[i]));
  }
  return info;
}
constexpr OpcodeInfo MakeInfo(std::string_view name, PopSpec pops, int pushes) {
  return OpcodeInfo{name, 0, {OperandKind::kU8, OperandKind::kU8}, 1,
                    static_cast<uint8_t>(pops.fixed), pops.plus_argc,
                    static_cast<uint8_t>(pushes)};
}

// Expands an operand list such as (kU32, kU8) into an argument list.
#define MINIVM_OPERANDS_ARG(...) __VA_OPT__({__VA_ARGS__}, )
using enum OperandKind;

inline constexpr OpcodeInfo kInfos[] = {
#define MINIVM_OPCODE_INFO(name, operands, pops, pushes, doc) \
  MakeInfo(#name, MINIVM_OPERANDS_ARG operands ToPopSpec(pops), pushes),
    MINIVM_OPCODES(MINIVM_OPCODE_INFO)
#undef MINIVM_OPCODE_INFO
};
#undef MINIVM_OPERANDS_ARG

constexpr bool ArgcIsLastU8Operand() {
  for (const OpcodeInfo& info : kInfos) {
    if (info.pops_argc &&
        (info.num_operands == 0 || info.operands[info.num_operands - 1] != OperandKind::kU8)) {
      return false;
    }
  }
  return true;
}
static_assert(ArgcIsLastU8Operand(), "an ARGC pop count needs a u8 argc as the last operand");

}  // namespace opcodes_internal

inline constexpr int kNumOpcodes =
    sizeof(opcodes_internal::kInfos) / sizeof(opcodes_internal::kInfos[0]);

constexpr const OpcodeInfo& GetOpcodeInfo(Opcode op) {
  return opcodes_internal::kInfos[static_cast<uint8_t>(op)];
}

// Bytes of an instruction, opcode included.
constexpr int OpcodeLength(Opcode op) { return GetOpcodeInfo(op).length; }

// The argument count of the instruction at `pc`, whose pops are ARGC + k.
inline int ArgcOperand(const uint8_t* pc) {
  return pc[GetOpcodeInfo(static_cast<Opcode>(*pc)).length - 1];
}

// Values the instruction at `pc` pops and pushes, and its net stack effect.
inline int PopCount(const uint8_t* pc) {
  const OpcodeInfo& info = GetOpcodeInfo(static_cast<Opcode>(*pc));
  return info.pops + (info.pops_argc ? ArgcOperand(pc) : 0);
}
inline int PushCount(const uint8_t* pc) {
  return GetOpcodeInfo(static_cast<Opcode>(*pc)).pushes;
}
inline int StackEffect(const uint8_t* pc) { return PushCount(pc) - PopCount(pc); }

// Operand readers. Unaligned, little-endian (the only hosts are x86-64 and
// AArch64, both little-endian).
template <typename T>
T ReadOperand(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint8_t ReadU8(const uint8_t* p) { return *p; }
inline uint16_t ReadU16(const uint8_t* p) { return ReadOperand<uint16_t>(p); }
inline uint32_t ReadU32(const uint8_t* p) { return ReadOperand<uint32_t>(p); }
inline int32_t ReadI32(const uint8_t* p) { return ReadOperand<int32_t>(p); }
inline uint64_t ReadV64(const uint8_t* p) { return ReadOperand<uint64_t>(p); }

}  // namespace minivm

#endif  // MINIVM_VM_BYTECODE_OPCODES_H_
