// Format (stable; tests compare it):
//
//   fn make #0: arity 1, locals 1, max stack 3, field caches 0, line 3
//     offset  line  MNEMONIC       operands
//      00000     4  LOAD_LOCAL     0
//      00003     4  JUMP_IF_FALSE  -> 27
//      00008     5  CALL           make#0, 1 arg
//
// Operands are decoded with names: functions, classes and globals as
// name#index, fields as name#symbol plus the cache index, strings quoted
// with escapes, jumps as absolute target offsets. Malformed code (an operand
// out of range, a truncated instruction) is shown, never trusted.
#include "vm/bytecode/disassembler.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gc/object.h"
#include "vm/bytecode/builtins.h"
#include "vm/bytecode/opcodes.h"

namespace minivm {
namespace {

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default: {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) {
          absl::StrAppendFormat(&out, "\\x%02X", u);
        } else {
          out.push_back(c);
        }
      }
    }
  }
  out += "\"";
  return out;
}

std::string Args(int argc) { return absl::StrCat(argc, argc == 1 ? " arg" : " args"); }

std::string FunctionName(const Program& p, uint32_t index) {
  if (index >= p.functions.size()) return absl::StrCat("<invalid>#", index);
  return absl::StrCat(p.functions[index]->name, "#", index);
}

std::string ClassName(const Program& p, uint32_t index) {
  if (index >= p.classes.size()) return absl::StrCat("<invalid>#", index);
  return absl::StrCat(p.classes[index]->name, "#", index);
}

std::string GlobalName(const Program& p, uint32_t index) {
  if (index >= p.global_names.size()) return absl::StrCat("<invalid>#", index);
  return absl::StrCat(p.global_names[index], "#", index);
}

std::string SymbolName(const Program& p, uint32_t id) {
  if (id >= p.symbols.size()) return absl::StrCat("<invalid>#", id);
  return absl::StrCat(p.symbols.Name(id), "#", id);
}

std::string BuiltinName(uint8_t id) {
  constexpr size_t kCount = sizeof(kBuiltinInfos) / sizeof(kBuiltinInfos[0]);
  if (id >= kCount) return absl::StrCat("<invalid>#", id);
  return std::string(kBuiltinInfos[id].name);
}

// Operands of the instruction at `pc` (the whole instruction is in bounds).
std::string DecodeOperands(const Program& p, Opcode op, const uint8_t* pc, size_t offset,
                           size_t length) {
  const uint8_t* a = pc + 1;
  switch (op) {
    case Opcode::PUSH_INT:
      return absl::StrCat(gc::Value::FromBits(ReadV64(a)).AsInt());
    case Opcode::PUSH_STRING: {
      const uint32_t i = ReadU32(a);
      if (i >= p.string_constants.size()) return absl::StrCat("<invalid>#", i);
      return absl::StrCat(Quote(p.string_constants[i]), "#", i);
    }
    case Opcode::LOAD_LOCAL:
    case Opcode::STORE_LOCAL:
      return absl::StrCat(ReadU16(a));
    case Opcode::LOAD_GLOBAL:
    case Opcode::STORE_GLOBAL:
      return GlobalName(p, ReadU32(a));
    case Opcode::GET_FIELD:
    case Opcode::SET_FIELD:
      return absl::StrCat(SymbolName(p, ReadU32(a)), ", cache ", ReadU32(a + 4));
    case Opcode::JUMP:
    case Opcode::JUMP_IF_FALSE:
    case Opcode::LOOP:
      return absl::StrCat("-> ", static_cast<int64_t>(offset + length) + ReadI32(a));
    case Opcode::CALL:
    case Opcode::SPAWN:
      return absl::StrCat(FunctionName(p, ReadU32(a)), ", ", Args(ReadU8(a + 4)));
    case Opcode::NEW:
    case Opcode::INIT_FIELDS:
      return absl::StrCat(ClassName(p, ReadU32(a)), ", ", Args(ReadU8(a + 4)));
    case Opcode::CALL_BUILTIN:
      return absl::StrCat(BuiltinName(ReadU8(a)), ", ", Args(ReadU8(a + 1)));
    default:
      return "";
  }
}

}  // namespace

std::string DisassembleFunction(const Program& program, const Function& fn) {
  std::string out = absl::StrFormat(
      "fn %s #%d: arity %d, locals %d, max stack %d, field caches %d, line %d\n", fn.name, fn.index,
      fn.arity, fn.num_locals, fn.max_stack, fn.num_field_caches, fn.line);
  const std::vector<uint8_t>& code = fn.code;
  size_t offset = 0;
  while (offset < code.size()) {
    const uint8_t byte = code[offset];
    const int line = fn.lines.LineFor(static_cast<uint32_t>(offset));
    if (byte >= kNumOpcodes) {
      absl::StrAppendFormat(&out, "  %05d %5d  <bad opcode %d>\n", offset, line, byte);
      ++offset;
      continue;
    }
    const Opcode op = static_cast<Opcode>(byte);
    const OpcodeInfo& info = GetOpcodeInfo(op);
    if (offset + info.length > code.size()) {
      absl::StrAppendFormat(&out, "  %05d %5d  %s <truncated>\n", offset, line,
                            std::string(info.name));
      break;
    }
    const std::string operands =
        DecodeOperands(program, op, code.data() + offset, offset, info.length);
    if (operands.empty()) {
      absl::StrAppendFormat(&out, "  %05d %5d  %s\n", offset, line, std::string(info.name));
    } else {
      absl::StrAppendFormat(&out, "  %05d %5d  %-14s %s\n", offset, line, std::string(info.name),
                            operands);
    }
    offset += info.length;
  }
  return out;
}

std::string Disassemble(const Program& program) {
  std::string out;
  absl::StrAppendFormat(&out, "program %s: %d functions, %d classes, %d globals, %d strings\n",
                        program.path, program.functions.size(), program.classes.size(),
                        program.global_names.size(), program.string_constants.size());
  for (const auto& klass : program.classes) {
    absl::StrAppendFormat(&out, "class %s #%d {", klass->name, klass->index);
    for (size_t i = 0; i < klass->field_symbols.size(); ++i) {
      absl::StrAppend(&out, i == 0 ? " " : ", ", program.symbols.Name(klass->field_symbols[i]));
    }
    absl::StrAppend(&out, klass->field_symbols.empty() ? "}\n" : " }\n");
  }
  for (size_t i = 0; i < program.global_names.size(); ++i) {
    absl::StrAppendFormat(&out, "global %s #%d\n", program.global_names[i], i);
  }
  for (const auto& fn : program.functions) {
    absl::StrAppend(&out, "\n", DisassembleFunction(program, *fn));
  }
  return out;
}

}  // namespace minivm
