#include "vm/bytecode/verifier.h"

#include <algorithm>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "vm/bytecode/builtins.h"
#include "vm/bytecode/opcodes.h"

namespace minivm {
namespace {

absl::Status Bad(uint32_t off, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("offset ", off, ": ", what));
}

absl::Status CheckOperands(const Program& program, const Function& fn, uint32_t off) {
  const uint8_t* pc = fn.code.data() + off;
  auto require = [off](bool ok, const char* what) {
    return ok ? absl::OkStatus() : Bad(off, what);
  };
  switch (static_cast<Opcode>(*pc)) {
    case Opcode::PUSH_STRING:
      return require(ReadU32(pc + 1) < program.string_constants.size(), "bad string constant");
    case Opcode::LOAD_LOCAL:
    case Opcode::STORE_LOCAL:
      return require(ReadU16(pc + 1) < fn.num_locals, "bad local");
    case Opcode::LOAD_GLOBAL:
    case Opcode::STORE_GLOBAL:
      return require(ReadU32(pc + 1) < program.global_names.size(), "bad global");
    case Opcode::GET_FIELD:
    case Opcode::SET_FIELD:
      return require(ReadU32(pc + 5) < fn.num_field_caches, "bad field cache");
    case Opcode::CALL:
    case Opcode::SPAWN: {
      const uint32_t callee = ReadU32(pc + 1);
      return require(
          callee < program.functions.size() && program.functions[callee]->arity == ArgcOperand(pc),
          "bad callee or argument count");
    }
    case Opcode::NEW:
    case Opcode::INIT_FIELDS: {
      const uint32_t klass = ReadU32(pc + 1);
      return require(klass < program.classes.size() && static_cast<uint32_t>(ArgcOperand(pc)) <=
                                                           program.classes[klass]->field_count,
                     "bad class or argument count");
    }
    case Opcode::CALL_BUILTIN:
      return require(pc[1] < std::size(kBuiltinInfos), "bad built-in");
    default:
      return absl::OkStatus();
  }
}

}  // namespace

int64_t JumpTarget(const uint8_t* code, uint32_t off) {
  return int64_t{off} + OpcodeLength(static_cast<Opcode>(code[off])) + ReadI32(code + off + 1);
}

absl::StatusOr<VerifiedCode> VerifyFunction(const Program& program, const Function& fn) {
  const uint8_t* code = fn.code.data();
  const size_t size = fn.code.size();
  if (size == 0) return absl::InvalidArgumentError("empty function");
  VerifiedCode v;
  v.is_start.assign(size, false);
  v.is_leader.assign(size, false);
  v.depth.assign(size, VerifiedCode::kUnreachable);
  for (uint32_t off = 0; off < size;) {
    if (code[off] >= kNumOpcodes) return absl::InvalidArgumentError("invalid opcode");
    const uint32_t len = OpcodeLength(static_cast<Opcode>(code[off]));
    if (off + len > size) return absl::InvalidArgumentError("truncated instruction");
    v.is_start[off] = true;
    off += len;
  }
  // Forward dataflow of the stack depth from offset 0.
  std::vector<uint32_t> work = {0};
  v.depth[0] = 0;
  v.is_leader[0] = true;
  auto flow = [&](uint32_t from, int64_t to, int depth) -> absl::Status {
    if (to == static_cast<int64_t>(size)) return Bad(from, "control falls off the end");
    if (to < 0 || to > static_cast<int64_t>(size) || !v.is_start[to]) {
      return absl::InvalidArgumentError(absl::StrCat("bad jump target ", to));
    }
    if (v.depth[to] == VerifiedCode::kUnreachable) {
      v.depth[to] = depth;
      work.push_back(static_cast<uint32_t>(to));
    } else if (v.depth[to] != depth) {
      return absl::InvalidArgumentError(absl::StrCat("inconsistent stack depth at ", to));
    }
    return absl::OkStatus();
  };
  while (!work.empty()) {
    const uint32_t off = work.back();
    work.pop_back();
    const uint8_t* pc = code + off;
    const Opcode op = static_cast<Opcode>(*pc);
    if (absl::Status s = CheckOperands(program, fn, off); !s.ok()) return s;
    const int depth = v.depth[off];
    const int after = depth + StackEffect(pc);
    if (depth < PopCount(pc) || after < 0 || after > fn.max_stack) {
      return absl::InvalidArgumentError(absl::StrCat("stack depth out of range at ", off));
    }
    const uint32_t next = off + OpcodeLength(op);
    switch (op) {
      case Opcode::RETURN:
        break;
      case Opcode::JUMP:
      case Opcode::JUMP_IF_FALSE:
      case Opcode::LOOP: {
        const int64_t target = JumpTarget(code, off);
        if ((op == Opcode::LOOP) != (target <= off)) {
          return Bad(off, op == Opcode::LOOP ? "LOOP must jump backward"
                                             : "a jump backward must be a LOOP");
        }
        if (absl::Status s = flow(off, target, after); !s.ok()) return s;
        v.is_leader[target] = true;
        if (op == Opcode::LOOP) v.loop_headers.push_back(static_cast<uint32_t>(target));
        if (op == Opcode::JUMP_IF_FALSE) {
          if (absl::Status s = flow(off, next, after); !s.ok()) return s;
          v.is_leader[next] = true;
        }
        break;
      }
      default:
        if (absl::Status s = flow(off, next, after); !s.ok()) return s;
        break;
    }
  }
  std::sort(v.loop_headers.begin(), v.loop_headers.end());
  v.loop_headers.erase(std::unique(v.loop_headers.begin(), v.loop_headers.end()),
                       v.loop_headers.end());
  return v;
}

}  // namespace minivm
