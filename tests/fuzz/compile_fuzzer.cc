// libFuzzer target: arbitrary bytes into the whole front end. Compile() must
// never crash, hang or overflow the stack, and must be self-consistent: a
// program xor errors, every error at a valid position, and a compiled
// program's code must decode cleanly (every jump lands on an instruction
// boundary inside the function) and disassemble.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "vm/bytecode/disassembler.h"
#include "vm/bytecode/opcodes.h"
#include "vm/compiler/compiler.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

// Decodes the code and follows the operand-stack depth through every jump:
// depths must agree where paths meet, stay within [0, max_stack], and be 0
// after each RETURN (returns are statements).
void CheckFunction(const minivm::Function& fn) {
  using minivm::Opcode;
  const size_t n = fn.code.size();
  Check(n > 0);
  std::vector<int> depth_at(n + 1, -1);
  std::vector<bool> boundary(n + 1, false);
  std::vector<size_t> targets;
  int depth = 0;
  bool reachable = true;
  size_t pc = 0;
  while (pc < n) {
    boundary[pc] = true;
    if (depth_at[pc] != -1) {
      if (reachable) Check(depth == depth_at[pc]);
      depth = depth_at[pc];
    }
    depth_at[pc] = depth;
    Check(fn.code[pc] < minivm::kNumOpcodes);
    const auto op = static_cast<Opcode>(fn.code[pc]);
    const minivm::OpcodeInfo& info = minivm::GetOpcodeInfo(op);
    Check(pc + info.length <= n);
    depth += minivm::StackEffect(fn.code.data() + pc);
    Check(depth >= 0 && depth <= fn.max_stack);
    if (op == Opcode::JUMP || op == Opcode::JUMP_IF_FALSE || op == Opcode::LOOP) {
      const int32_t rel = minivm::ReadI32(fn.code.data() + pc + 1);
      Check(op == Opcode::LOOP ? rel < 0 : rel >= 0);  // back edges are LOOPs
      const int64_t t = static_cast<int64_t>(pc + info.length) + rel;
      Check(t >= 0 && t < static_cast<int64_t>(n));
      const auto target = static_cast<size_t>(t);
      targets.push_back(target);
      if (depth_at[target] != -1) {
        Check(depth_at[target] == depth);
      } else {
        depth_at[target] = depth;
      }
    }
    if (op == Opcode::RETURN) Check(depth == 0);
    reachable = op != Opcode::JUMP && op != Opcode::LOOP && op != Opcode::RETURN;
    pc += info.length;
  }
  Check(!reachable);  // the last instruction never falls off the end
  for (size_t t : targets) Check(boundary[t]);
  Check(fn.num_field_caches == 0 || fn.field_caches != nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  minivm::CompileResult result = minivm::Compile("fuzz.mv", source);
  Check((result.program == nullptr) != result.errors.empty());
  for (const minivm::Diagnostic& d : result.errors) {
    Check(d.line >= 1 && d.column >= 1 && !d.message.empty());
  }
  if (result.program != nullptr) {
    for (const auto& fn : result.program->functions) CheckFunction(*fn);
    Check(!minivm::Disassemble(*result.program).empty());
  }
  return 0;
}
