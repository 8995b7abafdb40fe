// The JIT driver in-process: compilation, publication, tier switches and the
// failure path (a Function the JIT rejects stays interpreted, with a message).
#include "vm/jit/jit.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/jit/compiled_ir.h"
#include "tests/unit/vm/program_builder.h"
#include "vm/jit/runtime.h"
#include "vm/runtime/vm.h"

namespace minivm::testing {
namespace {

struct JitRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::string jit_log;
  std::vector<JitState> states;   // per function, after the run
  std::vector<uint32_t> hotness;  // per function, after the run
};

jit::JitConfig JitConfigFor(JitMode mode, bool sync = false) {
  jit::JitConfig config;
  config.mode = mode;
  config.sync = sync;
  return config;
}

// Runs `program` in-process with a JIT configured by `config`; eager
// compiles everything first.
JitRun RunWithJit(std::unique_ptr<Program> program, jit::JitConfig config, uint32_t threshold) {
  JitRun r;
  FILE* log = std::tmpfile();
  config.log = log;
  config.verbose = true;
  config.threshold = threshold;
  RunHooks hooks = WithJit(config);
  hooks.after_run = [&r](VM& vm) {
    for (const auto& fn : vm.program().functions) {
      r.states.push_back(fn->jit_state.load());
      r.hotness.push_back(fn->hotness.load());
    }
  };
  RunResult run = RunProgram(std::move(program), {}, hooks);
  r.exit_code = run.exit_code;
  r.out = std::move(run.out);
  r.err = std::move(run.err);
  r.jit_log = ReadAll(log);
  return r;
}

// main() { print(add(2, 3)); }  with add(a, b) { return a + b; }
std::unique_ptr<Program> AddProgram() {
  ProgramBuilder pb;
  Asm add;
  add.Load(0).Load(1).Op(Opcode::ADD).Ret();
  const uint32_t add_fn = pb.AddFunction("add", 2, 2, 2, add);
  Asm main;
  main.Int(2).Int(3).Call(add_fn, 2).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 2, main));
  return pb.Build();
}

// The symbol list the JIT registers is the ABI table's, in its order, each
// name bound to its own C function.
TEST(JitRuntimeTest, SymbolsFollowTheAbiTable) {
  const std::vector<jit::RuntimeSymbol> symbols = jit::RuntimeSymbols();
  ASSERT_EQ(symbols.size(), static_cast<size_t>(jit::kNumRuntimeFunctions));
  const auto at = [&](jit::RuntimeFunction f) { return symbols[static_cast<size_t>(f)]; };
  EXPECT_EQ(at(jit::RuntimeFunction::kPoll).name, "minivm_jit_poll");
  EXPECT_EQ(at(jit::RuntimeFunction::kPoll).address, reinterpret_cast<void*>(&minivm_jit_poll));
  EXPECT_EQ(at(jit::RuntimeFunction::kStackOverflow).name, "minivm_jit_stack_overflow");
  EXPECT_EQ(at(jit::RuntimeFunction::kStackOverflow).address,
            reinterpret_cast<void*>(&minivm_jit_stack_overflow));
  for (const jit::RuntimeSymbol& s : symbols) {
    EXPECT_TRUE(s.name.starts_with("minivm_jit_")) << s.name;
    EXPECT_NE(s.address, nullptr) << s.name;
  }
}

TEST(JitTest, EagerCompilesEveryFunctionAndRunsIt) {
  JitRun r = RunWithJit(AddProgram(), JitConfigFor(JitMode::kEager), jit::kDefaultThreshold);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "5\n");
  for (JitState s : r.states) EXPECT_EQ(s, JitState::kQuick);  // nothing got hot
  EXPECT_NE(r.jit_log.find("[jit] compiled add"), std::string::npos) << r.jit_log;
  EXPECT_NE(r.jit_log.find("[jit] compiled main"), std::string::npos) << r.jit_log;
}

TEST(JitTest, RejectedFunctionStaysInterpretedWithAMessage) {
  // bad(): the two paths into `join` reach it with different stack depths,
  // which the interpreter tolerates (RETURN takes the top) but compiled
  // code cannot represent: the JIT must refuse it, and the program must
  // still give the interpreter's answer.
  ProgramBuilder pb;
  const uint32_t bad_fn = pb.AddFunction("bad", 0, 0, 3, InconsistentDepthCode());
  Asm main;
  main.Call(bad_fn, 0).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 2, main));

  JitRun r = RunWithJit(pb.Build(), JitConfigFor(JitMode::kEager), jit::kDefaultThreshold);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "7\n");
  EXPECT_EQ(r.states[bad_fn], JitState::kFailed);
  EXPECT_EQ(r.states[bad_fn + 1], JitState::kQuick);  // main
  EXPECT_NE(r.jit_log.find("[jit] bad: not compiled, stays interpreted: inconsistent stack depth"),
            std::string::npos)
      << r.jit_log;
}

// main calls add(s, i) for i = 0..4 and prints the sum (10); add's index
// in *add_fn, main's is the next.
ProgramBuilder FiveAddsProgram(uint32_t* add_fn) {
  ProgramBuilder pb;
  Asm add;
  add.Load(0).Load(1).Op(Opcode::ADD).Ret();
  *add_fn = pb.AddFunction("add", 2, 2, 2, add);
  Asm main;
  main.Int(0);
  for (int i = 0; i < 5; ++i) main.Int(i).Call(*add_fn, 2);
  main.Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 3, main));
  return pb;
}

TEST(JitTest, SyncTieringCompilesAHotFunctionAtTheThreshold) {
  // main calls add 5 times; with threshold 3 and --jit-sync, add is
  // compiled at its third call; main, called once and loop-free, never is.
  uint32_t add_fn = 0;
  ProgramBuilder pb = FiveAddsProgram(&add_fn);

  JitRun r = RunWithJit(pb.Build(), JitConfigFor(JitMode::kAuto, /*sync=*/true), 3);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "10\n");
  EXPECT_EQ(r.states[add_fn], JitState::kCompiled);
  EXPECT_EQ(r.states[add_fn + 1], JitState::kInterpreted);
}

// main: i = 0; while (i < 1000) i = i + 1; print(i). Its index in *main_fn.
ProgramBuilder CountingLoopProgram(uint32_t* main_fn) {
  ProgramBuilder pb;
  Asm main;
  EmitCountingLoop(main, 0, 1000);
  main.Load(0).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  *main_fn = pb.AddFunction("main", 0, 1, 2, main);
  pb.SetMain(*main_fn);
  return pb;
}

TEST(JitTest, OsrMovesARunningLoopToCompiledCode) {
  // main: i = 0; while (i < 1000) i = i + 1; print(i)
  uint32_t main_fn = 0;
  ProgramBuilder pb = CountingLoopProgram(&main_fn);

  JitRun r = RunWithJit(pb.Build(), JitConfigFor(JitMode::kAuto, /*sync=*/true), 10);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1000\n");
  EXPECT_EQ(r.states[main_fn], JitState::kCompiled);
  EXPECT_NE(r.jit_log.find("[jit] main: on-stack replacement at line 1"), std::string::npos)
      << r.jit_log;
}

TEST(JitTest, EagerSyncTierUpRecompilesAHotFunctionAtEntry) {
  // As SyncTieringCompilesAHotFunctionAtTheThreshold, under eager: add's
  // quick code reports it at its third call, which --jit-sync recompiles at
  // once and continues in the optimised code; the later calls go there
  // directly, so add's hotness stops at the threshold. main stays quick.
  uint32_t add_fn = 0;
  ProgramBuilder pb = FiveAddsProgram(&add_fn);

  JitRun r = RunWithJit(pb.Build(), JitConfigFor(JitMode::kEager, /*sync=*/true), 3);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "10\n");
  EXPECT_EQ(r.states[add_fn], JitState::kCompiled);
  EXPECT_EQ(r.hotness[add_fn], 3u);
  EXPECT_EQ(r.states[add_fn + 1], JitState::kQuick);
  EXPECT_NE(r.jit_log.find("[jit] optimised add"), std::string::npos) << r.jit_log;
  EXPECT_EQ(r.jit_log.find("[jit] optimised main"), std::string::npos) << r.jit_log;
}

TEST(JitTest, EagerSyncTierUpMovesARunningLoopToOptimisedCode) {
  // main: i = 0; while (i < 1000) i = i + 1; print(i) under eager, threshold
  // 10: the quick code reports main at the back-edge that reaches 10 (1 for
  // the call, 9 back-edges) and continues the loop in the optimised code
  // through its OSR entry, which counts nothing: hotness stays 10.
  uint32_t main_fn = 0;
  ProgramBuilder pb = CountingLoopProgram(&main_fn);

  JitRun r = RunWithJit(pb.Build(), JitConfigFor(JitMode::kEager, /*sync=*/true), 10);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1000\n");
  EXPECT_EQ(r.states[main_fn], JitState::kCompiled);
  EXPECT_EQ(r.hotness[main_fn], 10u);
  EXPECT_NE(r.jit_log.find("[jit] optimised main"), std::string::npos) << r.jit_log;
}

TEST(JitTest, BackgroundCompilerStopsWithTheVm) {
  // A background compile may still be queued or running when the program
  // ends; destroying the VM joins the compiler without hanging or crashing.
  JitRun r = RunWithJit(AddProgram(), JitConfigFor(JitMode::kAuto), 1);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "5\n");
}

}  // namespace
}  // namespace minivm::testing
