// What the runtime needs from the JIT tier (vm/jit/), and nothing more: the
// runtime never includes LLVM. The interpreter counts a Function's calls and
// loop back-edges (Function::hotness) and reports a hot Function here; the
// JIT publishes compiled code in Function::jit_code, which the interpreter
// then calls at CALL and at loop back-edges (on-stack replacement).
// main.cc, the composition root, creates the JIT and installs it in the VM.
#ifndef MINIVM_VM_RUNTIME_JIT_HOOKS_H_
#define MINIVM_VM_RUNTIME_JIT_HOOKS_H_

#include "vm/bytecode/program.h"

namespace minivm {

struct VMThread;

class JitHooks {
 public:
  virtual ~JitHooks() = default;

  // `fn`'s hotness reached the threshold. Called by the interpreter on
  // thread `t` (any thread, possibly more than once per Function), with the
  // thread's state written back, so that the JIT may block it for a
  // synchronous compilation (--jit-sync) in a gc::BlockedScope.
  virtual void OnHot(VMThread* t, const Function* fn) = 0;

  // The interpreter moved an activation of `fn` into compiled code at the
  // loop header at bytecode `offset` (on-stack replacement). For logging.
  virtual void OnOsr(const Function* fn, uint32_t offset) = 0;

  // Stops compiling (joins a background compiler). Code already published
  // stays valid until this object is destroyed, which the VM does only once
  // no thread can run it.
  virtual void StopCompiling() = 0;
};

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_JIT_HOOKS_H_
