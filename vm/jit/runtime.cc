#include "vm/jit/runtime.h"

#include "gc/allocation.h"
#include "vm/runtime/builtins.h"
#include "vm/runtime/interpreter.h"
#include "vm/runtime/slow_paths.h"
#include "vm/runtime/vm.h"

using minivm::Frame;
using minivm::Function;
using minivm::Klass;
using minivm::Outcome;
using minivm::VMThread;
using minivm::gc::Object;
using minivm::gc::Value;

extern "C" {

void minivm_jit_poll(VMThread* t) noexcept { t->vm->heap()->SafepointPoll(&t->mutator); }

Object* minivm_jit_new(VMThread* t, const Klass* klass, uint64_t size) noexcept {
  Object* obj = minivm::gc::AllocateSlowPath(&t->mutator, klass, size, 0);
  if (obj == nullptr) minivm::RaiseHeapExhausted(t, size);
  return obj;
}

int32_t minivm_jit_binary(VMThread* t, uint32_t opcode, Value* operands) noexcept {
  return minivm::BinarySlow(t, static_cast<minivm::Opcode>(opcode), operands) ? 1 : 0;
}

int32_t minivm_jit_equal(uint64_t a, uint64_t b) noexcept {
  return minivm::ValuesEqualSlow(Value::FromBits(a), Value::FromBits(b)) ? 1 : 0;
}

void minivm_jit_unary_type(VMThread* t, uint32_t opcode, uint64_t a) noexcept {
  minivm::RaiseUnaryType(t, static_cast<minivm::Opcode>(opcode), Value::FromBits(a));
}

int64_t minivm_jit_field_slot(VMThread* t, uint64_t obj, uint32_t symbol,
                              minivm::FieldCache* cache, int32_t write) noexcept {
  return minivm::ResolveField(t, Value::FromBits(obj), symbol, cache, write != 0);
}

int32_t minivm_jit_get_index(VMThread* t, Value* operands) noexcept {
  return minivm::GetIndexSlow(t, operands) ? 1 : 0;
}

int32_t minivm_jit_set_index(VMThread* t, Value* operands) noexcept {
  return minivm::SetIndexSlow(t, operands) ? 1 : 0;
}

int32_t minivm_jit_builtin(VMThread* t, uint32_t builtin, Value* args, uint32_t argc) noexcept {
  return static_cast<int32_t>(minivm::CallBuiltin(t, static_cast<minivm::Builtin>(builtin), args,
                                                  static_cast<int>(argc)));
}

int32_t minivm_jit_spawn(VMThread* t, const Function* fn, Value* args, uint32_t argc) noexcept {
  Value result;
  if (!t->vm->Spawn(t, fn, args, static_cast<int>(argc), &result)) return 0;
  args[0] = result;  // nothing collects between Spawn's return and this store
  return 1;
}

uint64_t minivm_jit_call_interpreted(VMThread* t, Frame* frame, uint64_t a0, uint64_t a1,
                                     uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5) noexcept {
  // EnterFrame's work that compiled callers leave out (calls.cc
  // .call.real, frames.cc .frame.lazy: t->fp is the callee's to write, and
  // the interpreter keeps it). Nothing here can collect before the arguments are stored.
  t->fp = frame;
  const minivm::Function* fn = frame->fn;
  minivm::gc::Value* base = frame->base;
  static_assert(minivm::kMaxRegisterArity == 6);
  const uint64_t args[] = {a0, a1, a2, a3, a4, a5};
  for (int i = 0; i < minivm::RegisterArgs(fn->arity); ++i) {
    base[i] = minivm::gc::Value::FromBits(args[i]);
  }
  for (int i = fn->arity; i < fn->num_locals; ++i) base[i] = minivm::gc::Value::Null();
  frame->set_pc(fn->code.data());
  const minivm::Outcome o = minivm::InterpretFrame(t, frame);
  if (o != minivm::Outcome::kReturn) return 2 * static_cast<uint64_t>(o);
  return base[0].bits();
}

uint64_t minivm_jit_continue_interpreted(VMThread* t, Frame* frame) noexcept {
  const minivm::Frame* const outer = t->resumed_frame;  // an activation further down, or null
  t->resumed_frame = frame;
  const minivm::Outcome o = minivm::InterpretFrame(t, frame, /*resume=*/true);
  t->resumed_frame = outer;
  if (o != minivm::Outcome::kReturn) return 2 * static_cast<uint64_t>(o);
  return frame->base[0].bits();
}

void minivm_jit_stack_overflow(VMThread* t, int32_t frames) noexcept {
  minivm::RaiseStackOverflow(t, frames != 0);
}

void* minivm_jit_hot(VMThread* t, const minivm::Function* fn, const void* self) noexcept {
  // Compiled code runs only after InstallJit, so there is a JIT.
  if (fn->jit_state.load(std::memory_order_relaxed) == minivm::JitState::kQuick) {
    t->vm->jit()->OnHot(t, fn);
  }
  const minivm::JitEntry code = fn->jit_code.load(std::memory_order_acquire);
  if (reinterpret_cast<const void*>(code) != self && !t->NativeStackLow()) {
    return reinterpret_cast<void*>(code);
  }
  fn->hotness.store(0, std::memory_order_relaxed);
  return nullptr;
}

}  // extern "C"

namespace minivm::jit {

std::vector<RuntimeSymbol> RuntimeSymbols() {
  return {
#define MINIVM_JIT_SYMBOL(id, symbol, ret, params) \
  RuntimeSymbol{#symbol, reinterpret_cast<void*>(&symbol)},
      MINIVM_JIT_RUNTIME(MINIVM_JIT_SYMBOL)
#undef MINIVM_JIT_SYMBOL
  };
}

}  // namespace minivm::jit
