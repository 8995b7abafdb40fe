// Interpreter benchmarks (Google Benchmark). Each benchmark compiles a small
// program once and runs it in-process on a fresh VM per iteration.
//
//   BM_Fib          dispatch and calls: fib(25), ~250k calls
//   BM_Loop         dispatch of a tight integer loop, per iteration
//   BM_AllocLoop    `while (i < n) { new C(); i = i + 1; }`: ns per object
//                   (loop overhead included, as the issue's target states)
//   BM_BinaryTrees  allocation plus collection: trees of depth 14
//
// Run: build/benchmarks/minivm_benchmarks  (see docs/performance.md)
#include <cstdio>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "vm/compiler/compiler.h"
#include "vm/runtime/vm.h"

namespace minivm {
namespace {

FILE* DevNull() {
  static FILE* f = std::fopen("/dev/null", "w");
  return f;
}

// Compiles and runs `source` once; returns false (and skips) on failure.
bool RunProgram(benchmark::State& state, const std::string& source,
                std::vector<std::string> args = {}) {
  CompileResult compiled = Compile("bench.mv", source);
  if (!compiled.errors.empty()) {
    state.SkipWithError(FormatDiagnostic("bench.mv", compiled.errors[0]).c_str());
    return false;
  }
  VmOptions options;
  options.program_args = std::move(args);
  options.out = DevNull();
  options.exit_process = false;
  auto vm = VM::Create(std::move(compiled.program), std::move(options));
  if (!vm.ok()) {
    state.SkipWithError(std::string(vm.status().message()).c_str());
    return false;
  }
  if ((*vm)->Run() != 0) {
    state.SkipWithError("program failed");
    return false;
  }
  return true;
}

void BM_Fib(benchmark::State& state) {
  const std::string source = R"(
fn fib(n) { if (n < 2) { return n; } return fib(n - 1) + fib(n - 2); }
fn main() { print(fib(25)); }
)";
  for (auto _ : state) {
    if (!RunProgram(state, source)) return;
  }
  state.counters["calls"] = benchmark::Counter(242785, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Fib)->Unit(benchmark::kMillisecond);

void BM_Loop(benchmark::State& state) {
  const int64_t n = 10'000'000;
  const std::string source = R"(
fn main() {
  var n = int(args()[0]);
  var i = 0;
  var sum = 0;
  while (i < n) { sum = sum + i; i = i + 1; }
  print(sum);
}
)";
  for (auto _ : state) {
    if (!RunProgram(state, source, {std::to_string(n)})) return;
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Loop)->Unit(benchmark::kMillisecond);

void BM_AllocLoop(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string source = R"(
class C { a, b }
fn main() {
  var n = int(args()[0]);
  var i = 0;
  while (i < n) { new C(); i = i + 1; }
}
)";
  for (auto _ : state) {
    if (!RunProgram(state, source, {std::to_string(n)})) return;
  }
  // items/s -> ns per object = 1e9 / items_per_second
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_AllocLoop)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

void BM_BinaryTrees(benchmark::State& state) {
  const std::string source = R"(
class Node { left, right }
fn make(d) { if (d == 0) { return new Node(); } return new Node(make(d - 1), make(d - 1)); }
fn check(n) { if (n.left == null) { return 1; } return 1 + check(n.left) + check(n.right); }
fn main() {
  var d = int(args()[0]);
  var total = 0;
  for (var i = 0; i < 8; i = i + 1) { total = total + check(make(d)); }
  print(total);
}
)";
  for (auto _ : state) {
    if (!RunProgram(state, source, {std::to_string(state.range(0))})) return;
  }
}
BENCHMARK(BM_BinaryTrees)->Arg(14)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace minivm
