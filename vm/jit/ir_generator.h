// LLVM IR generation: bytecode to LLVM IR, one Function at a time. Internal to vm/jit/ (the
// only place that includes LLVM headers).
#ifndef MINIVM_VM_JIT_IR_GENERATOR_H_
#define MINIVM_VM_JIT_IR_GENERATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "llvm/IR/Module.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/vm.h"

namespace minivm::jit {

// Emits `fn` into `module` as the JitEntry-typed function `symbol`.
// Fails (and leaves nothing usable in the module) on bytecode the analysis
// rejects: the function then stays interpreted. A nonzero `hot_threshold`
// makes quick-tier code, which counts hotness and moves to optimised code
// (ir_generator.cc, design 10); 0 makes optimised-tier code.
absl::Status EmitFunction(const VM& vm, const Function& fn, const std::string& symbol,
                          llvm::Module* module, uint32_t hot_threshold);

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_IR_GENERATOR_H_
