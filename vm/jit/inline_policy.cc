// The inlining decision (inline_policy.h).
#include "vm/jit/inline_policy.h"

#include "vm/bytecode/opcodes.h"
#include "vm/bytecode/verifier.h"

namespace minivm::jit {

std::optional<std::vector<uint32_t>> CallsOfLoopFree(const Function& fn) {
  std::vector<uint32_t> calls;
  for (uint32_t off = 0; off < fn.code.size();
       off += OpcodeLength(static_cast<Opcode>(fn.code[off]))) {
    const Opcode op = static_cast<Opcode>(fn.code[off]);
    if (op == Opcode::SPAWN || op == Opcode::LOOP) return std::nullopt;
    if (op == Opcode::CALL) calls.push_back(ReadU32(fn.code.data() + off + 1));
  }
  return calls;
}

bool IsSmallLeaf(const Function& fn) {
  if (fn.code.size() > kMaxInlineBytecode) return false;
  std::optional<std::vector<uint32_t>> calls = CallsOfLoopFree(fn);
  return calls.has_value() && calls->empty();
}

bool ShouldInline(const Program& program, const Function& callee, const InlineSite& site) {
  if (!site.optimising) return false;
  if (callee.code.size() > (site.self ? kMaxRecursiveInlineBytecode : kMaxInlineBytecode) ||
      site.inlined_bytes + callee.code.size() > kInlineBudget) {
    return false;
  }
  if (site.depth >= kMaxInlineDepth || site.copies > kMaxRecursiveInlineLevel) return false;
  std::optional<std::vector<uint32_t>> calls = CallsOfLoopFree(callee);
  if (!calls.has_value()) return false;
  if (!site.self) {
    for (uint32_t index : *calls) {
      if (!IsSmallLeaf(*program.functions[index])) return false;
    }
  }
  return VerifyFunction(program, callee).ok();
}

}  // namespace minivm::jit
