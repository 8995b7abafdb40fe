// The runtime entry points compiled code calls: thin C-ABI wrappers around
// the same slow paths the interpreter uses (vm/runtime/slow_paths.h), the
// heap's allocation slow path, safepoint polls, built-ins, SPAWN and calls
// into the interpreter.
//
// Contract (codegen.cc relies on every line):
//  1. Before calling any of these except minivm_jit_equal, compiled code has
//     written its whole frame back: every local and operand slot below the
//     instruction's stack depth is stored in the VM-managed value stack,
//     t->sp points just above them and the frame's pc is the instruction's.
//     So a collection inside the call sees and updates every reference, and
//     an error or an agent's stack walk sees the right line.
//  2. After a call that may collect, compiled code reloads every slot it
//     still needs from the value stack, never reusing a Value from before.
//  3. All are noexcept: no C++ exception may unwind through JIT frames.
//  4. Results that are Values are written to value-stack slots, never
//     returned, except minivm_jit_new's fresh object, which the caller
//     stores before anything else can collect.
#ifndef MINIVM_VM_JIT_RUNTIME_H_
#define MINIVM_VM_JIT_RUNTIME_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "gc/object.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/thread.h"

extern "C" {

// A safepoint poll whose inline check found the poll word set.
void minivm_jit_poll(minivm::VMThread* t) noexcept;
// NEW's allocation slow path (the TLAB fast path failed or the object is too
// big for a TLAB). The object, or null with `heap exhausted` raised.
minivm::gc::Object* minivm_jit_new(minivm::VMThread* t, const minivm::Klass* klass,
                                   uint64_t size) noexcept;
// ADD..GE, DIV, MOD off the integer fast path; 1 on success, 0 raised.
int32_t minivm_jit_binary(minivm::VMThread* t, uint32_t opcode,
                          minivm::gc::Value* operands) noexcept;
// EQ/NE on two references with different bits: 1 if equal Strings.
int32_t minivm_jit_equal(uint64_t a, uint64_t b) noexcept;
// NEG on a non-int: raises; compiled code then returns kError.
void minivm_jit_neg_type(minivm::VMThread* t, uint64_t a) noexcept;
// GET_FIELD/SET_FIELD after an inline-cache miss: the slot, or -1 raised.
int64_t minivm_jit_field_slot(minivm::VMThread* t, uint64_t obj, uint32_t symbol,
                              minivm::FieldCache* cache, int32_t write) noexcept;
// GET_INDEX/SET_INDEX off the fast path; 1 on success, 0 raised.
int32_t minivm_jit_get_index(minivm::VMThread* t, minivm::gc::Value* operands) noexcept;
int32_t minivm_jit_set_index(minivm::VMThread* t, minivm::gc::Value* operands) noexcept;
// CALL_BUILTIN; returns an Outcome. The result replaces args[0].
int32_t minivm_jit_builtin(minivm::VMThread* t, uint32_t builtin, minivm::gc::Value* args,
                           uint32_t argc) noexcept;
// SPAWN; 1 on success with the Thread in args[0], 0 raised.
int32_t minivm_jit_spawn(minivm::VMThread* t, const minivm::Function* fn,
                         minivm::gc::Value* args, uint32_t argc) noexcept;
// CALL of a function without compiled code, or with the native stack low:
// runs the pushed frame (t->fp) in the interpreter. Returns an Outcome.
int32_t minivm_jit_call_interpreted(minivm::VMThread* t, minivm::Frame* frame) noexcept;
// CALL found the frame array (frames != 0) or the value stack full.
void minivm_jit_stack_overflow(minivm::VMThread* t, int32_t frames) noexcept;

}  // extern "C"

namespace minivm::jit {

struct RuntimeSymbol {
  std::string_view name;
  void* address;
};

// Every entry point above, for the JIT's symbol table.
std::vector<RuntimeSymbol> RuntimeSymbols();

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_RUNTIME_H_
