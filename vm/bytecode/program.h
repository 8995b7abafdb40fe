// A compiled program: classes, functions with their bytecode and line tables,
// globals, and constants. Produced by the compiler (vm/compiler/compiler.h),
// immutable afterwards except for the inline caches and tiering counters,
// which are atomics written by the threads that run the code.
#ifndef MINIVM_VM_BYTECODE_PROGRAM_H_
#define MINIVM_VM_BYTECODE_PROGRAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gc/object.h"

namespace minivm {

// A class: the collector's layout plus what the language knows about it.
// Built-in classes (Array, Bytes, String, Thread) are Klasses too, owned by
// the VM (vm/runtime/builtin_classes.h), so `obj->klass` identifies them.
struct Klass : gc::ClassLayout {
  std::string name;
  std::vector<uint32_t> field_symbols;  // field i's name, as a symbol id
  int index = -1;                       // in Program::classes; -1 for built-ins

  // Field slot for a name, or -1.
  int FieldIndex(uint32_t symbol) const {
    for (size_t i = 0; i < field_symbols.size(); ++i) {
      if (field_symbols[i] == symbol) return static_cast<int>(i);
    }
    return -1;
  }
};

// Maps bytecode offsets to source lines. Entries are sorted by offset; an
// offset's line is that of the last entry at or before it. Every offset of a
// function has a line (the first entry is at offset 0).
class LineTable {
 public:
  void Add(uint32_t offset, int line) {
    if (!entries_.empty() && entries_.back().second == line) return;
    if (!entries_.empty() && entries_.back().first == offset) {
      entries_.back().second = line;
      return;
    }
    entries_.emplace_back(offset, line);
  }
  int LineFor(uint32_t offset) const;
  const std::vector<std::pair<uint32_t, int>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<uint32_t, int>> entries_;
};

// An inline cache for GET_FIELD / SET_FIELD: the last klass seen and the
// field's slot, packed into one word so that threads racing on it never see
// a torn pair: bits 16..63 the Klass address, bits 0..15 the slot.
class FieldCache {
 public:
  static uint64_t Pack(const Klass* k, int slot) {
    return (reinterpret_cast<uint64_t>(k) << 16) | static_cast<uint16_t>(slot);
  }
  // The slot if `k` hits, else -1.
  int Lookup(const Klass* k) const {
    const uint64_t w = word_.load(std::memory_order_relaxed);
    return (w >> 16) == reinterpret_cast<uint64_t>(k) ? static_cast<int>(w & 0xFFFF) : -1;
  }
  void Update(const Klass* k, int slot) {
    word_.store(Pack(k, slot), std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> word_{0};
};

// Compiled code for a Function (vm/jit/; docs/jit.md, "Calls"):
//   uint64_t code(void* thread, void* frame, uint32_t entry,
//                 uint64_t arg0, ..., uint64_t argN-1)
// with the Function's `arity` arguments' bits in registers when arity <=
// kMaxRegisterArity, and none otherwise (the code then reads them at the
// frame's base). `thread` is the VMThread, `frame` the Function's Frame,
// already pushed by the caller (its function and base set). `entry` is 0 to
// start at the beginning, or 1 + the bytecode offset of a loop header to
// continue an interpreted activation there (on-stack replacement; the
// arguments passed are then ignored and every slot is read from the frame).
// Returns the result Value's bits, or 2 x the Outcome (vm/runtime/
// interpreter.h) when the activation did not return: 2 for an error, 4 for
// exit. No Value has those bits (even, so not an int; not null; below any
// object's address). JitEntry is the type it is stored as; callers cast it
// to the type with the arguments (RunCompiled in vm/runtime/interpreter.cc).
// That is the C calling convention. Optimised code has a second entry of
// the same signature in the JIT's own convention (Function::jit_body).
inline constexpr int kMaxRegisterArity = 6;
// How many of a Function of `arity` parameters' arguments compiled code
// takes in registers: all of them up to kMaxRegisterArity, else none.
constexpr int RegisterArgs(int arity) { return arity <= kMaxRegisterArity ? arity : 0; }
using JitEntry = uint64_t (*)(void* thread, void* frame, uint32_t entry);

// Tiering state of a Function (vm/jit/jit.h). kQuick: compiled at the quick
// tier (--jit=eager), whose code counts hotness and reports the function for
// the optimising tier (kQueued, then kCompiled, or kFailed keeping the quick
// code).
enum class JitState : uint8_t { kInterpreted, kQueued, kCompiled, kFailed, kQuick };

struct Function {
  std::string name;
  uint32_t index = 0;        // in Program::functions
  uint16_t arity = 0;
  uint16_t num_locals = 0;   // parameters included
  uint16_t max_stack = 0;    // deepest operand stack the code reaches
  // Per local slot, the names declared in it ("/"-joined, in declaration
  // order, when sibling scopes reuse the slot); shorter than num_locals only
  // for functions not built by the compiler. Only tools read it.
  std::vector<std::string> local_names;
  int line = 0;              // of the `fn` keyword
  std::vector<uint8_t> code;
  LineTable lines;
  // One per GET_FIELD/SET_FIELD site; the instruction's second operand indexes it.
  std::unique_ptr<FieldCache[]> field_caches;
  uint32_t num_field_caches = 0;

  // Tiering (mutable: a Function is otherwise immutable once compiled).
  // `hotness` counts calls and loop back-edges run by the interpreter and by
  // quick-tier code; it is a lossy relaxed counter (load + store, no locked
  // add): a lost increment only delays compilation. `jit_code` is published
  // with release after the code is fully materialised, at most twice (the
  // quick tier's, then the optimising tier's); readers load it with acquire.
  // Code once published stays valid for the VM's life, so an activation
  // still running the quick code is unaffected by the second store.
  mutable std::atomic<uint32_t> hotness{0};
  mutable std::atomic<JitState> jit_state{JitState::kInterpreted};
  mutable std::atomic<JitEntry> jit_code{nullptr};
  // The entry optimised code calls (vm/jit/calls.cc .call.convention): the
  // same signature in the JIT's own calling convention (preserve_none on
  // x86-64: the callee saves no registers, so a call between optimised
  // functions saves only what the caller keeps live across it). Never
  // called from C++. For optimised code it is the code itself and
  // `jit_code` a shared trampoline into it; for quick code, a shared
  // trampoline into `jit_code`. Both trampolines find their target through
  // the pushed frame's function, and each pointer is published (release)
  // after the one its trampoline reads, so either pointer, once loaded
  // (acquire), leads to complete code. Null until the first code is
  // published; a compiled caller that finds it null runs the callee in the
  // interpreter, as for any callee not compiled yet.
  mutable std::atomic<const void*> jit_body{nullptr};
};

class SymbolTable {
 public:
  uint32_t Intern(const std::string& name) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (inserted) names_.push_back(name);
    return it->second;
  }
  const std::string& Name(uint32_t id) const { return names_[id]; }
  size_t size() const { return names_.size(); }

 private:
  absl::flat_hash_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
};

struct Program {
  std::string path;  // as given on the command line; used in messages and traces
  std::vector<std::unique_ptr<Klass>> classes;
  std::vector<std::unique_ptr<Function>> functions;
  std::vector<std::string> global_names;
  std::vector<std::string> string_constants;  // materialised as heap Strings at VM start
  SymbolTable symbols;                        // field names
  // Runs the global initialisers in source order; executed before main.
  uint32_t init_function = 0;
  uint32_t main_function = 0;
};

}  // namespace minivm

#endif  // MINIVM_VM_BYTECODE_PROGRAM_H_
