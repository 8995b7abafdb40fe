// main of the in-process Google Benchmarks: Abseil's locks set up as the
// minivm executable sets them up (base/sync_setup.h), so that what a
// benchmark measures is what the VM pays.
#include "base/sync_setup.h"
#include "benchmark/benchmark.h"

int main(int argc, char** argv) {
  minivm::base::InitSynchronization();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
