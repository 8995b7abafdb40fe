// The LLVM IR the JIT generates for a hand-assembled Program, for tests
// that assert what the code generator emits (tests/unit/jit/*_test.cc).
#ifndef MINIVM_TESTS_UNIT_JIT_COMPILED_IR_H_
#define MINIVM_TESTS_UNIT_JIT_COMPILED_IR_H_

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "tests/unit/vm/program_builder.h"
#include "vm/jit/jit.h"
#include "vm/runtime/vm.h"

namespace minivm::testing {

enum class IrTier {
  kQuick,      // --jit=eager, nothing hot
  kOptimised,  // --jit=auto --jit-sync --jit-threshold=1 --jit-opt=0: as emitted
};

// A hook that installs a JIT configured by `config` before the run
// (eager compiles everything first), as vm/main.cc does.
inline RunHooks WithJit(const jit::JitConfig& config) {
  RunHooks hooks;
  hooks.before_run = [config](VM& vm) {
    absl::StatusOr<std::unique_ptr<jit::Jit>> jit = jit::Jit::Create(&vm, config);
    ASSERT_TRUE(jit.ok()) << jit.status();
    if (config.mode == JitMode::kEager) (*jit)->CompileAll();
    vm.InstallJit(*std::move(jit), config.threshold);
  };
  return hooks;
}

// Runs `program` with --print-jit in `tier` and returns the IR printed for
// the function `name` (empty if it was not compiled). The program's own
// output is discarded; its exit code is checked.
inline std::string CompiledIr(std::unique_ptr<Program> program, IrTier tier,
                              const std::string& name) {
  FILE* log = std::tmpfile();
  jit::JitConfig config;
  config.mode = tier == IrTier::kQuick ? JitMode::kEager : JitMode::kAuto;
  config.sync = true;
  config.print = true;
  config.print_only = name;
  config.opt_level = 0;
  config.log = log;
  config.threshold = tier == IrTier::kQuick ? uint32_t{1} << 30 : 1;
  const RunResult r = RunProgram(std::move(program), {}, WithJit(config));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return ReadAll(log);
}

// How many times `needle` occurs in `haystack`.
inline int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace minivm::testing

#endif  // MINIVM_TESTS_UNIT_JIT_COMPILED_IR_H_
