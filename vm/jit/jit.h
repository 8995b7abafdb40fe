// The JIT tier: compiles bytecode Functions to native code with LLVM's ORC
// LLJIT (docs/jit.md).
//
// Tiers: every Function starts interpreted. --jit=auto compiles a Function
// at --jit-opt once the interpreter has counted `threshold` calls plus loop
// back-edges in it, on a background thread while the interpreter keeps
// running; a running activation moves to the compiled code at its next loop
// back-edge (on-stack replacement). --jit=eager compiles every Function at
// the quick tier before the program starts; quick code counts the same way
// and a hot Function is recompiled at --jit-opt likewise, its activations
// moving over at entry or at a loop back-edge (tier-up).
//
// The public face is LLVM-free (pimpl): vm/runtime only sees JitHooks.
#ifndef MINIVM_VM_JIT_JIT_H_
#define MINIVM_VM_JIT_JIT_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/jit_hooks.h"
#include "vm/runtime/options.h"
#include "vm/runtime/vm.h"

namespace minivm::jit {

// --jit=eager compiles the program in batches of at most this many
// functions or this much bytecode (jit.cc .groups): large enough that a
// batch's fixed costs (a module, an object file, a mapping) are shared by
// many functions, small enough that a batch is milliseconds.
inline constexpr size_t kBatchFunctions = 512;
inline constexpr size_t kBatchBytecode = 64 * 1024;

// Default hotness threshold (--jit-threshold): calls plus loop back-edges
// after which the interpreter (--jit=auto) or quick-tier code (--jit=eager)
// reports a function for the optimising tier.
inline constexpr uint32_t kDefaultThreshold = 1000;

// The tiers of compiled code (jit.cc .tiers). --jit=eager compiles every
// function at the quick tier; --jit=auto compiles hot functions at the
// optimising tier, at --jit-opt.
enum class Tier { kQuick, kOptimized };

// --jit=eager compiles batches on up to this many threads, one per hardware
// thread (jit.cc .eager-threads).
inline constexpr size_t kMaxEagerThreads = 8;

// Default --jit-memory, as HotSpot's 240 MB ReservedCodeCacheSize: about
// half a million small functions.
inline constexpr uint64_t kDefaultJitMemory = uint64_t{256} << 20;

struct JitConfig {
  JitMode mode = JitMode::kAuto;  // kAuto or kEager
  bool sync = false;              // --jit-sync: compile on the thread that found the function hot
  bool verbose = false;           // --verbose:jit: one line per compilation and OSR
  bool print = false;             // --print-jit: the optimised IR of each compiled function
  std::string print_only;         // --print-jit=NAME: only that function's
  int opt_level = 2;              // --jit-opt, 0..3 (jit.cc .tiers)
  FILE* log = stderr;             // where verbose and print output go
  std::string perf_map;           // --perf-map: the perf map file to write, or "" (perf_map.h)
  uint64_t memory_limit = kDefaultJitMemory;  // --jit-memory: code memory cap (code_memory.h)
  // --jit-threshold: the hotness at which quick-tier code reports its
  // function for the optimising tier (the interpreter takes it from
  // VM::jit_threshold).
  uint32_t threshold = kDefaultThreshold;
};


// Functions with more bytecode than this stay interpreted (HotSpot's
// HugeMethodLimit, 8000 bytecodes): LLVM's compile time grows with the
// function, to about 90 s for a 200 KB one, and a function that large is
// rarely the hot one.
inline constexpr size_t kMaxCompiledBytecode = 8000;

class Jit final : public JitHooks {
 public:
  // Initialises LLVM's native target and an LLJIT instance for `vm`. A perf
  // map file that cannot be written is FailedPrecondition.
  static absl::StatusOr<std::unique_ptr<Jit>> Create(const VM* vm, JitConfig config);
  ~Jit() override;
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  // Compiles `fn` at the optimising tier on the calling thread and
  // publishes its code. False if it failed and `fn` has no code; it then
  // stays interpreted (or at the quick tier), with a line under
  // --verbose:jit.
  bool Compile(const Function* fn);
  // --jit=eager: compiles every Function of the program at the quick tier,
  // on up to kMaxEagerThreads threads, this one included.
  void CompileAll();

  // JitHooks. OnHot queues `fn` for the background compiler (started on
  // first use), or with `sync` compiles it at once while `t` counts as
  // blocked (a collection can proceed meanwhile). StopCompiling joins the
  // background compiler.
  void OnHot(VMThread* t, const Function* fn) override;
  void OnOsr(const Function* fn, uint32_t offset) override;
  void StopCompiling() override;

  struct Stats {
    uint64_t compiled = 0;
    uint64_t failed = 0;
    double total_ms = 0;  // code generation, optimisation and machine code
  };
  Stats stats() const;

 private:
  struct Impl;
  explicit Jit(std::unique_ptr<Impl> impl);
  static void WorkerLoop(Jit* jit);
  std::unique_ptr<Impl> impl_;
};

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_JIT_H_
