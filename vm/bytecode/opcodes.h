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
// STACK(n): fixed stack effect n. VAR: effect depends on an operand (see the
// note); StackEffect() in opcodes.cc computes it.
//
// X(NAME, operands, stack effect, description)
#ifndef MINIVM_VM_BYTECODE_OPCODES_H_
#define MINIVM_VM_BYTECODE_OPCODES_H_

#include <cstdint>
#include <cstring>
#include <string_view>

namespace minivm {

enum class OperandKind : uint8_t { kU8, kU16, kU32, kI32, kV64 };

// clang-format off
#define MINIVM_OPCODES(X)                                                      \
  /* constants */                                                              \
  X(PUSH_INT,     (kV64),        1, "push the Value whose bits are the operand (always an int)") \
  X(PUSH_NULL,    (),            1, "push null")                               \
  X(PUSH_STRING,  (kU32),        1, "push the program's string constant #u32 (a heap String)") \
  X(POP,          (),           -1, "discard the top of stack")                \
  /* variables */                                                              \
  X(LOAD_LOCAL,   (kU16),        1, "push local slot #u16")                    \
  X(STORE_LOCAL,  (kU16),       -1, "pop into local slot #u16")                \
  X(LOAD_GLOBAL,  (kU32),        1, "push global #u32")                        \
  X(STORE_GLOBAL, (kU32),       -1, "pop into global #u32")                    \
  /* objects: field operands are (symbol u32, inline cache index u32) */       \
  X(GET_FIELD,    (kU32, kU32),  0, "[obj] -> [obj.field]; null: null dereference; no such field: unknown field") \
  X(SET_FIELD,    (kU32, kU32), -2, "[obj, v] -> []; obj.field = v")           \
  X(GET_INDEX,    (),           -1, "[obj, i] -> [obj[i]] for Array, Bytes, String") \
  X(SET_INDEX,    (),           -3, "[obj, i, v] -> []; obj[i] = v for Array, Bytes (0..255)") \
  /* arithmetic and comparison: [a, b] -> [a op b] */                          \
  X(ADD,          (),           -1, "int + int (wraps at 63 bits), String + String concatenates") \
  X(SUB,          (),           -1, "int - int")                               \
  X(MUL,          (),           -1, "int * int")                               \
  X(DIV,          (),           -1, "int / int, truncating; b == 0: division by zero") \
  X(MOD,          (),           -1, "int % int, sign of a; b == 0: division by zero") \
  X(EQ,           (),           -1, "1 if equal (ints by value, Strings by contents, else identity) else 0") \
  X(NE,           (),           -1, "negation of EQ")                          \
  X(LT,           (),           -1, "int < int -> 1 or 0")                     \
  X(LE,           (),           -1, "int <= int")                              \
  X(GT,           (),           -1, "int > int")                               \
  X(GE,           (),           -1, "int >= int")                              \
  X(NEG,          (),            0, "[a] -> [-a] for ints")                    \
  X(NOT,          (),            0, "[a] -> [1 if a is falsy else 0]")         \
  /* control flow */                                                           \
  X(JUMP,         (kI32),        0, "forward jump")                            \
  X(JUMP_IF_FALSE,(kI32),       -1, "pop; jump if falsy (null or 0)")          \
  X(LOOP,         (kI32),        0, "backward jump (negative offset); a safepoint poll site") \
  /* calls */                                                                  \
  X(CALL,         (kU32, kU8), VAR, "call function #u32 with u8 args (== its arity): 1 - argc; a poll site") \
  X(CALL_BUILTIN, (kU8, kU8),  VAR, "call built-in #u8 with u8 args: 1 - argc") \
  X(NEW,          (kU32, kU8), VAR, "new instance of class #u32; u8 args fill the first fields: 1 - argc") \
  X(INIT_FIELDS,  (kU32, kU8), VAR, "[obj, a1..an] -> [obj]: obj (a fresh #u32) gets fields 0..n-1 = a1..an, n = u8: -n") \
  X(SPAWN,        (kU32, kU8), VAR, "start function #u32 with u8 args on a new thread; push the Thread: 1 - argc") \
  X(RETURN,       (),           -1, "pop the result; drop the frame; push the result in the caller")
// clang-format on

enum class Opcode : uint8_t {
#define MINIVM_OPCODE_ENUM(name, operands, effect, doc) name,
#define VAR 0
  MINIVM_OPCODES(MINIVM_OPCODE_ENUM)
#undef VAR
#undef MINIVM_OPCODE_ENUM
};

inline constexpr int kNumOpcodes = 0
#define MINIVM_OPCODE_COUNT(name, operands, effect, doc) +1
    MINIVM_OPCODES(MINIVM_OPCODE_COUNT)
#undef MINIVM_OPCODE_COUNT
    ;

struct OpcodeInfo {
  std::string_view name;
  uint8_t num_operands;
  OperandKind operands[2];
  uint8_t length;        // bytes, opcode included
  bool variable_effect;  // stack effect depends on the argc operand
  int8_t stack_effect;   // when fixed
};

// Indexed by opcode.
const OpcodeInfo& GetOpcodeInfo(Opcode op);

// Net stack effect of the instruction at `pc` (resolves VAR).
int StackEffect(const uint8_t* pc);

// Operand readers. Unaligned, little-endian (the only hosts are x86-64 and
// AArch64, both little-endian).
inline uint8_t ReadU8(const uint8_t* p) { return *p; }
inline uint16_t ReadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t ReadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline int32_t ReadI32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint64_t ReadV64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace minivm

#endif  // MINIVM_VM_BYTECODE_OPCODES_H_
