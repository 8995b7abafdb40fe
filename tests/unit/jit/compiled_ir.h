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

// Runs `program` with --print-jit in `tier` and returns the IR printed for
// the function `name` (empty if it was not compiled). The program's own
// output is discarded; its exit code is checked.
inline std::string CompiledIr(std::unique_ptr<Program> program, IrTier tier,
                              const std::string& name) {
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  FILE* log = std::tmpfile();
  VmOptions options;
  options.out = out;
  options.err = err;
  options.exit_process = false;
  options.heap.max_heap_bytes = size_t{64} << 20;
  int exit_code = -1;
  {
    absl::StatusOr<std::unique_ptr<VM>> vm = VM::Create(std::move(program), options);
    EXPECT_TRUE(vm.ok()) << vm.status();
    jit::JitConfig config;
    config.mode = tier == IrTier::kQuick ? JitMode::kEager : JitMode::kAuto;
    config.sync = true;
    config.print = true;
    config.print_only = name;
    config.opt_level = 0;
    config.log = log;
    config.threshold = tier == IrTier::kQuick ? uint32_t{1} << 30 : 1;
    absl::StatusOr<std::unique_ptr<jit::Jit>> jit = jit::Jit::Create(vm->get(), config);
    EXPECT_TRUE(jit.ok()) << jit.status();
    if (config.mode == JitMode::kEager) (*jit)->CompileAll();
    (*vm)->InstallJit(*std::move(jit), config.threshold);
    exit_code = (*vm)->Run();
  }
  ReadAll(out);  // ReadAll closes each file
  const std::string errors = ReadAll(err);
  EXPECT_EQ(exit_code, 0) << errors;
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
