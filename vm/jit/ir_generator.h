// LLVM IR generation: bytecode to LLVM IR, one Function at a time. Internal to vm/jit/ (the
// only place that includes LLVM headers).
#ifndef MINIVM_VM_JIT_IR_GENERATOR_H_
#define MINIVM_VM_JIT_IR_GENERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "llvm/IR/Module.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/vm.h"

namespace minivm::jit {

// A call site whose callee was inlined (ir_generator.cc, design 10).
struct InlinedCall {
  const Function* callee;
  const Function* caller;  // the compiled function, or an inlined body in it
  int line;                // of the call, in `caller`
};

// Emits `fn` into `module` as the function `symbol`, of JitEntry's
// convention (vm/bytecode/program.h). Fails (and leaves nothing usable in
// the module) on bytecode the analysis rejects: the function then stays
// interpreted. A nonzero `hot_threshold` makes quick-tier code, which counts
// hotness and moves to optimised code (ir_generator.cc, design 11); 0 makes
// optimised-tier code. `inlined`, if given, receives the call sites whose
// callees were inlined.
absl::Status EmitFunction(const VM& vm, const Function& fn, const std::string& symbol,
                          llvm::Module* module, uint32_t hot_threshold,
                          std::vector<InlinedCall>* inlined = nullptr);

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_IR_GENERATOR_H_
