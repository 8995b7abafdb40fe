// libFuzzer target: arbitrary bytes into the whole front end. Compile() must
// never crash, hang or overflow the stack, and must be self-consistent: a
// program xor errors, every error at a valid position, and a compiled
// program's code must pass the bytecode verifier and disassemble.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "vm/bytecode/disassembler.h"
#include "vm/bytecode/opcodes.h"
#include "vm/bytecode/verifier.h"
#include "vm/compiler/compiler.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

// The bytecode verifier's checks (vm/bytecode/verifier.h: encodings, operand
// ranges, jump targets, consistent depths within [0, max_stack], back edges
// only by LOOP), plus what the compiler promises beyond them: the operand
// stack is empty after each RETURN (returns are statements).
void CheckFunction(const minivm::Program& program, const minivm::Function& fn) {
  absl::StatusOr<minivm::VerifiedCode> verified = minivm::VerifyFunction(program, fn);
  Check(verified.ok());
  for (size_t pc = 0; pc < fn.code.size(); pc += minivm::OpcodeLength(
                                               static_cast<minivm::Opcode>(fn.code[pc]))) {
    if (static_cast<minivm::Opcode>(fn.code[pc]) == minivm::Opcode::RETURN &&
        verified->depth[pc] != minivm::VerifiedCode::kUnreachable) {
      Check(verified->depth[pc] == 1);
    }
  }
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
    for (const auto& fn : result.program->functions) CheckFunction(*result.program, *fn);
    Check(!minivm::Disassemble(*result.program).empty());
  }
  return 0;
}
