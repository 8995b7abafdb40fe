// The runtime entry points compiled code calls: thin C-ABI wrappers around
// the same slow paths the interpreter uses (vm/runtime/slow_paths.h), the
// heap's allocation slow path, safepoint polls, built-ins, SPAWN and calls
// into the interpreter.
//
// Contract (the code generator relies on every point):
// .written-back  Before calling any of these except minivm_jit_equal,
//    compiled code has written its frame back (frames.cc
//    .frame.write-back): every local and operand slot below the
//    instruction's stack depth is in the VM-managed value stack, but those
//    the frame's int mask names (frames.cc .frame.int-mask), and the
//    frame's pc is the instruction's. Unless the call is a CALL's, t->fp is
//    the frame and t->sp points just above the slots; a CALL's callee sets
//    both (frames.cc .frame.lazy). So a collection inside the
//    call sees and updates every reference, and an error or an agent's
//    stack walk sees the right line.
// .reloaded  After a call that may collect, compiled code reloads every
//    slot it still needs but the ints from the value stack, never reusing a
//    reference from before.
// .noexcept  All are noexcept: no C++ exception may unwind through JIT
//    frames.
// .results  Results that are Values are written to value-stack slots, never
//    returned, except minivm_jit_new's fresh object, which the caller
//    stores before anything else can collect.
#ifndef MINIVM_VM_JIT_RUNTIME_H_
#define MINIVM_VM_JIT_RUNTIME_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "gc/object.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/thread.h"

// The runtime ABI, stated once. X(Id, symbol, return type, (parameters)):
// this table declares the C functions below, RuntimeFunction (the IR
// generator's handle on each), the LLVM declarations compiled code calls
// (vm/jit/ir_generator.cc derives each one's LLVM signature from the C
// function's own type, RuntimeFunctionType) and the symbol list the JIT
// registers (RuntimeSymbols). A definition in runtime.cc whose signature
// differs from its row does not compile (two C functions of one name), so
// the generated code and the runtime cannot disagree on a signature.
// clang-format off
#define MINIVM_JIT_RUNTIME(X)                                                                    \
  /* A safepoint poll whose inline check found the poll word set. */                            \
  X(kPoll, minivm_jit_poll, void, (minivm::VMThread* t))                                         \
  /* NEW's allocation slow path (the TLAB fast path failed or the object is too big for a */   \
  /* TLAB). The object, or null with `heap exhausted` raised. */                                \
  X(kNew, minivm_jit_new, minivm::gc::Object*,                                                   \
    (minivm::VMThread* t, const minivm::Klass* klass, uint64_t size))                            \
  /* ADD..GE, DIV, MOD, BIT_AND..SHR off the integer fast path; 1 on success, 0 raised. */   \
  /* Only ADD, DIV and MOD can succeed there (BinarySlowCanSucceed, slow_paths.h). */          \
  X(kBinary, minivm_jit_binary, int32_t,                                                         \
    (minivm::VMThread* t, uint32_t opcode, minivm::gc::Value* operands))                         \
  /* EQ/NE on two references with different bits: 1 if equal Strings. Pure: it neither */     \
  /* writes memory the caller can see nor reaches a safepoint (so no spill around it). */       \
  X(kEqual, minivm_jit_equal, int32_t, (uint64_t a, uint64_t b))                                 \
  /* NEG or BIT_NOT on a non-int: raises; compiled code then returns kError. */                \
  X(kUnaryType, minivm_jit_unary_type, void,                                                     \
    (minivm::VMThread* t, uint32_t opcode, uint64_t a))                                          \
  /* GET_FIELD/SET_FIELD after an inline-cache miss: the slot, or -1 raised. */                 \
  X(kFieldSlot, minivm_jit_field_slot, int64_t,                                                  \
    (minivm::VMThread* t, uint64_t obj, uint32_t symbol, minivm::FieldCache* cache,              \
     int32_t write))                                                                             \
  /* GET_INDEX/SET_INDEX off the fast path; 1 on success, 0 raised. */                          \
  X(kGetIndex, minivm_jit_get_index, int32_t, (minivm::VMThread* t, minivm::gc::Value* operands)) \
  X(kSetIndex, minivm_jit_set_index, int32_t, (minivm::VMThread* t, minivm::gc::Value* operands)) \
  /* CALL_BUILTIN; returns an Outcome. The result replaces args[0]. */                          \
  X(kBuiltin, minivm_jit_builtin, int32_t,                                                       \
    (minivm::VMThread* t, uint32_t builtin, minivm::gc::Value* args, uint32_t argc))             \
  /* SPAWN; 1 on success with the Thread in args[0], 0 raised. */                               \
  X(kSpawn, minivm_jit_spawn, int32_t,                                                           \
    (minivm::VMThread* t, const minivm::Function* fn, minivm::gc::Value* args, uint32_t argc))   \
  /* CALL of a function without compiled code, or with the native stack low: stores the */     \
  /* arguments (up to kMaxRegisterArity; more are in place already) and nulls the other */      \
  /* locals of the pushed `frame`, makes it t->fp, sets its pc and runs it in the interpreter. */ \
  /* Returns what compiled code returns (JitEntry): the result's bits or a sentinel. */        \
  X(kCallInterpreted, minivm_jit_call_interpreted, uint64_t,                                     \
    (minivm::VMThread* t, minivm::Frame* frame, uint64_t a0, uint64_t a1, uint64_t a2,           \
     uint64_t a3, uint64_t a4, uint64_t a5))                                                     \
  /* Optimised code found no room for a CALL (frames.cc .checks.once): its activation, */        \
  /* written back up to its innermost inlined frame t->fp, which is at the CALL, continues in */ \
  /* the interpreter until `frame` (the compiled function's) returns. Returns as */            \
  /* kCallInterpreted. */                                                                       \
  X(kContinueInterpreted, minivm_jit_continue_interpreted, uint64_t,                             \
    (minivm::VMThread* t, minivm::Frame* frame))                                                 \
  /* CALL found the frame array (frames != 0) or the value stack full. */                       \
  X(kStackOverflow, minivm_jit_stack_overflow, void, (minivm::VMThread* t, int32_t frames))     \
  /* Quick-tier code `self` of `fn` counted it to the threshold: reports it to the JIT */      \
  /* (JitHooks::OnHot) once, which queues it for the optimising tier or, with --jit-sync, */   \
  /* compiles it here. Returns the optimised code to continue in, or null (not there yet, */   \
  /* or the native stack is low) after restarting fn's count. */                               \
  X(kHot, minivm_jit_hot, void*,                                                                 \
    (minivm::VMThread* t, const minivm::Function* fn, const void* self))
// clang-format on

extern "C" {
#define MINIVM_JIT_DECLARE(id, symbol, ret, params) ret symbol params noexcept;
MINIVM_JIT_RUNTIME(MINIVM_JIT_DECLARE)
#undef MINIVM_JIT_DECLARE
}  // extern "C"

namespace minivm::jit {

enum class RuntimeFunction {
#define MINIVM_JIT_ENUM(id, symbol, ret, params) id,
  MINIVM_JIT_RUNTIME(MINIVM_JIT_ENUM)
#undef MINIVM_JIT_ENUM
};

inline constexpr int kNumRuntimeFunctions = 0
#define MINIVM_JIT_COUNT(id, symbol, ret, params) +1
    MINIVM_JIT_RUNTIME(MINIVM_JIT_COUNT)
#undef MINIVM_JIT_COUNT
    ;

struct RuntimeSymbol {
  std::string_view name;
  void* address;
};

// Every entry point above, for the JIT's symbol table, in RuntimeFunction
// order.
std::vector<RuntimeSymbol> RuntimeSymbols();

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_RUNTIME_H_
