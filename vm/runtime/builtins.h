// The built-in functions of docs/language.md ("Built-in functions"), called by
// CALL_BUILTIN.
#ifndef MINIVM_VM_RUNTIME_BUILTINS_H_
#define MINIVM_VM_RUNTIME_BUILTINS_H_

#include "gc/object.h"
#include "vm/bytecode/builtins.h"
#include "vm/runtime/interpreter.h"
#include "vm/runtime/thread.h"

namespace minivm {

// Runs built-in `b` on the arguments in the stack slots [args, args + argc).
// Precondition: t->sp == args + argc and the top frame's pc are written back,
// because a built-in may allocate (a moving collection rewrites the slots,
// which is why the arguments are passed as slots, not values). On kReturn
// the result is in *args (for argc == 0, the slot at the old top).
Outcome CallBuiltin(VMThread* t, Builtin b, gc::Value* args, int argc);

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_BUILTINS_H_
