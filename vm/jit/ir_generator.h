// LLVM IR generation: bytecode to LLVM IR, one Function at a time. Internal to vm/jit/ (the
// only place that includes LLVM headers).
#ifndef MINIVM_VM_JIT_IR_GENERATOR_H_
#define MINIVM_VM_JIT_IR_GENERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "llvm/IR/CallingConv.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Triple.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/vm.h"

namespace minivm::jit {

// A call site whose callee was inlined (calls.cc .inline).
struct InlinedCall {
  const Function* callee;
  // The inlined body the call is in, or null for the compiled function's
  // own body (a recursive function's copy of itself is an inlined body).
  const Function* caller;
  int line;  // of the call, in `caller` (or the compiled function)
};

// The calling convention of optimised code on `target` (calls.cc
// .call.convention): LLVM's preserve_none on x86-64, where LLVM 19
// implements it, the C convention elsewhere. Quick code has the C
// convention: fast instruction selection handles no other, and would fall
// back to SelectionDAG.
llvm::CallingConv::ID OptimisedCallingConv(const llvm::Triple& target);

// The shared trampolines between the two entries of compiled code
// (Function::jit_code and jit_body in vm/bytecode/program.h), one per
// number of register arguments, 0 to kMaxRegisterArity. Each has compiled
// code's signature and finds its target through the frame's function.
enum class Trampoline {
  kEnterOptimised,  // C convention; calls frame->fn->jit_body (optimised code)
  kEnterQuick,      // optimised code's convention; calls frame->fn->jit_code
};
std::string TrampolineSymbol(Trampoline kind, int register_args);

// Emits every trampoline into `module` (its target triple set).
void EmitTrampolines(llvm::Module* module);

// Emits `fn` into `module` as the function `symbol`, of compiled code's
// signature (JitEntry in vm/bytecode/program.h) in its tier's calling
// convention (OptimisedCallingConv). Fails (and leaves nothing usable in
// the module) on bytecode the analysis rejects: the function then stays
// interpreted. A nonzero `hot_threshold` makes quick-tier code, which counts
// hotness and moves to optimised code (polls.cc .tier-up); 0 makes
// optimised-tier code. `inlined`, if given, receives the call sites whose
// callees were inlined.
absl::Status EmitFunction(const VM& vm, const Function& fn, const std::string& symbol,
                          llvm::Module* module, uint32_t hot_threshold,
                          std::vector<InlinedCall>* inlined = nullptr);

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_IR_GENERATOR_H_
