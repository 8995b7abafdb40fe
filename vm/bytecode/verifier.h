// The bytecode verifier: checks that one Function's code is well formed and
// computes the facts a consumer that compiles it needs (the JIT, vm/jit/).
//
// What it checks, per reachable instruction:
//  - a valid opcode whose operands fit in the code;
//  - operands that index the Program or the Function (string constants,
//    locals, globals, field caches, callees with a matching arity, classes
//    with enough fields, built-ins) are in range;
//  - jumps land on an instruction; JUMP and JUMP_IF_FALSE go forward and
//    LOOP backward, so every cycle passes a LOOP (a safepoint poll);
//  - the operand-stack depth is the same on every path into an instruction,
//    the instruction pops no more than is there, and the depth stays within
//    [0, max_stack];
//  - control never falls off the end of the code.
// The compiler (vm/compiler/) only emits such code; the unit tests verify
// its output. The interpreter does not run the verifier: it trusts its only
// producer, the compiler, and needs none of the facts (it keeps sp at run
// time); a verifying load would cost every program's startup for nothing.
#ifndef MINIVM_VM_BYTECODE_VERIFIER_H_
#define MINIVM_VM_BYTECODE_VERIFIER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "vm/bytecode/program.h"

namespace minivm {

// What verification learned about a function, indexed by bytecode offset.
struct VerifiedCode {
  static constexpr int kUnreachable = -1;
  std::vector<int> depth;       // operand-stack depth before the instruction, or kUnreachable
  std::vector<bool> is_start;   // an instruction starts here
  std::vector<bool> is_leader;  // starts a basic block (entry, jump target, after a branch)
  std::vector<uint32_t> loop_headers;  // LOOP targets, sorted and unique
};

// The target offset of the jump instruction (JUMP, JUMP_IF_FALSE, LOOP) at
// `off`; may be out of range on unverified code.
int64_t JumpTarget(const uint8_t* code, uint32_t off);

// Verifies `fn`, a function of `program`; an InvalidArgument error names the
// offset and what is wrong.
absl::StatusOr<VerifiedCode> VerifyFunction(const Program& program, const Function& fn);

}  // namespace minivm

#endif  // MINIVM_VM_BYTECODE_VERIFIER_H_
