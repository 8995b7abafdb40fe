// The out-of-line halves of instructions, shared by both tiers: the
// interpreter (vm/runtime/interpreter.cc) and compiled code (vm/jit/, through
// the entry points in vm/jit/runtime.cc) call the same functions, so an
// instruction fails with the same error and message in either tier.
//
// Contract for every function here that takes a VMThread: the caller has
// written the thread's state back (t->sp, and the current frame's pc) first,
// because these may allocate, collect, or raise an error whose trace is read
// from the frames. `operands` point at the instruction's operand slots on the
// VM-managed value stack; results are written there, never returned in C++
// locals, so that a collection inside the call updates them.
#ifndef MINIVM_VM_RUNTIME_SLOW_PATHS_H_
#define MINIVM_VM_RUNTIME_SLOW_PATHS_H_

#include <cstdint>

#include "absl/base/optimization.h"
#include "gc/object.h"
#include "vm/bytecode/opcodes.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/thread.h"

namespace minivm {

// Binary arithmetic and comparisons when the integer fast path did not
// apply: operands[0] op operands[1] into operands[0]. False with the error
// raised.
bool BinarySlow(VMThread* t, Opcode op, gc::Value* operands);

// Whether BinarySlow can succeed for `op` when the fast path (two ints; for
// DIV and MOD, a divisor above 0) did not apply: only for ADD (two Strings)
// and DIV and MOD (other int divisors). Every other operator then has a
// non-int operand and raises, so compiled code's slow path for it need not
// continue (vm/jit/operators.cc .op.raise-only). BinarySlow checks it.
constexpr bool BinarySlowCanSucceed(Opcode op) {
  return op == Opcode::ADD || op == Opcode::DIV || op == Opcode::MOD;
}

// EQ/NE for two different bit patterns: equal Strings. Never allocates,
// never raises, never reaches a safepoint.
bool ValuesEqualSlow(gc::Value a, gc::Value b);

// NEG or BIT_NOT (`op`) on `a`, which is not an int: a type error.
void RaiseUnaryType(VMThread* t, Opcode op, gc::Value a);

// GET_FIELD/SET_FIELD after a cache miss: the slot of `symbol` in `obj` (any
// value); updates `cache`. -1 with the error raised. Never allocates.
int ResolveField(VMThread* t, gc::Value obj, uint32_t symbol, FieldCache* cache, bool write);

// GET_INDEX [obj, i] -> operands[0]; SET_INDEX [obj, i, v]. False with the
// error raised.
bool GetIndexSlow(VMThread* t, gc::Value* operands);
bool SetIndexSlow(VMThread* t, gc::Value* operands);

// `frames`: the frame array is full, else the value stack is.
void RaiseStackOverflow(VMThread* t, bool frames);
void RaiseHeapExhausted(VMThread* t, size_t size);

// Pushes frame `f` for `fn` whose arguments are the top `fn->arity` slots
// below `sp`: nulls the other locals and sets fn, pc (the first
// instruction) and base. Returns false (nothing changed) when the frame
// array or the value stack is full. Compiled code inlines the same checks
// (vm/jit/ir_generator.cc, EmitCall).
inline bool EnterFrame(VMThread* t, Frame* f, const Function* fn, gc::Value* sp) {
  gc::Value* base = sp - fn->arity;
  if (ABSL_PREDICT_FALSE(f >= t->frames_end)) return false;
  if (ABSL_PREDICT_FALSE(base + fn->num_locals + fn->max_stack + kStackSlack > t->stack_end)) {
    return false;
  }
  for (gc::Value* p = sp; p < base + fn->num_locals; ++p) *p = gc::Value::Null();
  f->fn = fn;
  f->set_pc(fn->code.data());
  f->base = base;
  return true;
}

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_SLOW_PATHS_H_
