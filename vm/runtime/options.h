// The command line (docs/language.md, "Command line"):
//   minivm [options] program.mv [program arguments...]
#ifndef MINIVM_VM_RUNTIME_OPTIONS_H_
#define MINIVM_VM_RUNTIME_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace minivm {

enum class JitMode { kOff, kAuto, kEager };

struct Options {
  bool help = false;
  bool version = false;
  size_t heap_bytes = size_t{1} << 30;  // --heap, default 1g
  size_t young_bytes = 0;               // --young; 0 = the heap's choice
  uint64_t seed = 0;
  size_t stack_depth = 10000;
  bool verbose_gc = false;
  bool verify_heap = false;
  uint64_t gc_stress = 0;
  bool disassemble = false;
  JitMode jit = JitMode::kAuto;
  uint32_t jit_threshold = 1000;  // --jit-threshold (vm/jit/jit.h)
  int jit_opt_level = 2;          // --jit-opt
  bool jit_sync = false;          // --jit-sync
  bool verbose_jit = false;       // --verbose:jit
  bool print_jit = false;         // --print-jit[=NAME]
  std::string print_jit_only;     // NAME, or empty for every function
  std::string perf_map;           // --perf-map[=FILE]: the file, or empty for none
  uint64_t jit_memory = uint64_t{256} << 20;  // --jit-memory (vm/jit/jit.h, kDefaultJitMemory)
  size_t tlab_bytes = 0;          // --tlab-size: fixed TLAB size; 0 = adaptive
  // -agentpath:/-agentlib: options exactly as written, in command-line order;
  // parsed and loaded by the agent API (agent_api/agent_loader.h).
  std::vector<std::string> agents;
  std::string program_path;       // empty only with --help / --version
  std::vector<std::string> program_args;
};

// Parses argv[1..argc). Errors carry the message printed after
// "minivm: error: ".
absl::StatusOr<Options> ParseOptions(int argc, const char* const* argv);

// "512k", "64m", "1g", "1048576": bytes. Exposed for tests.
absl::StatusOr<size_t> ParseSize(std::string_view text);

// The --help text.
std::string UsageText();

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_OPTIONS_H_
