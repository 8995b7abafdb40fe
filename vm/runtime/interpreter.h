// The bytecode interpreter: one non-recursive dispatch loop per thread.
#ifndef MINIVM_VM_RUNTIME_INTERPRETER_H_
#define MINIVM_VM_RUNTIME_INTERPRETER_H_

#include "vm/bytecode/program.h"
#include "vm/runtime/thread.h"

namespace minivm {

enum class Outcome {
  kReturn,  // the function returned; its result is t->sp[-1]
  kError,   // t->error is set; t->fp/t->sp still describe the faulting frame
  kExit,    // exit(n) was called (t->exit_code) and the VM does not end the process
};

// Runs `fn` on thread `t` until it returns. Its `fn->arity` arguments are the
// top slots of t's value stack (below t->sp). On kReturn the arguments are
// replaced by the result. On kError and kExit the caller reads the trace, if
// it wants one, and then restores t->fp and t->sp to what they were.
// The calling OS thread must be the one `t` is attached for.
// Runs compiled code instead when fn has some (vm/jit/).
Outcome Interpret(VMThread* t, const Function* fn);

// Runs the frame `frame` == t->fp, already pushed (EnterFrame) and at its
// first instruction, until it returns; then as Interpret. Compiled code calls
// this for a callee that has no compiled code.
// With `resume`, continues an activation that compiled code wrote back
// instead: `frame` and the frames above it up to t->fp (the bodies inlined
// into it) are written, each caller at its CALL, the innermost at the
// instruction to run, with its operands below t->sp. Runs them until `frame`
// returns; the caller sets t->resumed_frame to `frame` for that time, so
// that its loops stay interpreted (interpreter.cc .tiering).
Outcome InterpretFrame(VMThread* t, Frame* frame, bool resume = false);

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_INTERPRETER_H_
