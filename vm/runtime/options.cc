#include "vm/runtime/options.h"

#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace minivm {
namespace {

// Splits "--name=value"; returns false if `arg` is not `name` with a value.
bool ValueOf(absl::string_view arg, absl::string_view name, absl::string_view* value) {
  if (!absl::StartsWith(arg, name) || arg.size() <= name.size() || arg[name.size()] != '=') {
    return false;
  }
  *value = arg.substr(name.size() + 1);
  return true;
}

absl::StatusOr<uint64_t> ParseCount(absl::string_view option, absl::string_view text, uint64_t min,
                                    uint64_t max) {
  uint64_t n;
  if (text.empty() || text[0] == '+' || text[0] == '-' || !absl::SimpleAtoi(text, &n) || n < min ||
      n > max) {
    return absl::InvalidArgumentError(absl::StrCat("invalid value '", text, "' for ", option,
                                                   " (expected an integer from ", min, " to ", max,
                                                   ")"));
  }
  return n;
}

}  // namespace

absl::StatusOr<size_t> ParseSize(std::string_view text_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  if (text.empty()) return absl::InvalidArgumentError("empty size");
  int shift = 0;
  switch (text.back()) {
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'm':
    case 'M':
      shift = 20;
      break;
    case 'g':
    case 'G':
      shift = 30;
      break;
    default:
      break;
  }
  absl::string_view digits = shift != 0 ? text.substr(0, text.size() - 1) : text;
  uint64_t n;
  if (digits.empty() || digits[0] == '+' || digits[0] == '-' || !absl::SimpleAtoi(digits, &n) ||
      n > (uint64_t{1} << 48) >> shift) {
    return absl::InvalidArgumentError(absl::StrCat("invalid size '", text, "'"));
  }
  return static_cast<size_t>(n << shift);
}

absl::StatusOr<Options> ParseOptions(int argc, const char* const* argv) {
  Options o;
  int i = 1;
  for (; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg.empty() || arg[0] != '-') break;  // the program
    absl::string_view v;
    if (arg == "--help" || arg == "-h") {
      o.help = true;
    } else if (arg == "--version") {
      o.version = true;
    } else if (ValueOf(arg, "--heap", &v)) {
      absl::StatusOr<size_t> s = ParseSize(std::string_view(v.data(), v.size()));
      if (!s.ok())
        return absl::InvalidArgumentError(absl::StrCat("--heap: ", s.status().message()));
      o.heap_bytes = *s;
    } else if (ValueOf(arg, "--young", &v)) {
      absl::StatusOr<size_t> s = ParseSize(std::string_view(v.data(), v.size()));
      if (!s.ok())
        return absl::InvalidArgumentError(absl::StrCat("--young: ", s.status().message()));
      if (*s == 0) return absl::InvalidArgumentError("--young: the size must be positive");
      o.young_bytes = *s;
    } else if (ValueOf(arg, "--seed", &v)) {
      absl::StatusOr<uint64_t> n = ParseCount("--seed", v, 0, UINT64_MAX);
      if (!n.ok()) return n.status();
      o.seed = *n;
    } else if (ValueOf(arg, "--stack-depth", &v)) {
      absl::StatusOr<uint64_t> n = ParseCount("--stack-depth", v, 1, uint64_t{1} << 24);
      if (!n.ok()) return n.status();
      o.stack_depth = *n;
    } else if (arg == "--verbose:gc") {
      o.verbose_gc = true;
    } else if (arg == "--verify-heap") {
      o.verify_heap = true;
    } else if (ValueOf(arg, "--gc-stress", &v)) {
      absl::StatusOr<uint64_t> n = ParseCount("--gc-stress", v, 1, UINT64_MAX);
      if (!n.ok()) return n.status();
      o.gc_stress = *n;
    } else if (arg == "--disassemble") {
      o.disassemble = true;
    } else if (ValueOf(arg, "--jit", &v)) {
      if (v == "off") {
        o.jit = JitMode::kOff;
      } else if (v == "auto") {
        o.jit = JitMode::kAuto;
      } else if (v == "eager") {
        o.jit = JitMode::kEager;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("invalid value '", v, "' for --jit (expected off, auto or eager)"));
      }
    } else if (ValueOf(arg, "--jit-threshold", &v)) {
      absl::StatusOr<uint64_t> n = ParseCount("--jit-threshold", v, 1, uint64_t{1} << 30);
      if (!n.ok()) return n.status();
      o.jit_threshold = static_cast<uint32_t>(*n);
    } else if (ValueOf(arg, "--jit-opt", &v)) {
      absl::StatusOr<uint64_t> n = ParseCount("--jit-opt", v, 0, 3);
      if (!n.ok()) return n.status();
      o.jit_opt_level = static_cast<int>(*n);
    } else if (arg == "--jit-sync") {
      o.jit_sync = true;
    } else if (arg == "--verbose:jit") {
      o.verbose_jit = true;
    } else if (arg == "--print-jit") {
      o.print_jit = true;
    } else if (ValueOf(arg, "--print-jit", &v)) {
      if (v.empty()) return absl::InvalidArgumentError("--print-jit=: expected a function name");
      o.print_jit = true;
      o.print_jit_only = std::string(v);
    } else if (ValueOf(arg, "--jit-memory", &v)) {
      absl::StatusOr<size_t> s = ParseSize(std::string_view(v.data(), v.size()));
      if (!s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--jit-memory: ", s.status().message()));
      }
      if (*s == 0) return absl::InvalidArgumentError("--jit-memory: the size must be positive");
      o.jit_memory = *s;
    } else if (arg == "--perf-map") {
      // The only file perf looks in for JIT code (vm/jit/perf_map.h).
      o.perf_map = absl::StrCat("/tmp/perf-", getpid(), ".map");
    } else if (ValueOf(arg, "--perf-map", &v)) {
      if (v.empty()) return absl::InvalidArgumentError("--perf-map=: expected a file");
      o.perf_map = std::string(v);
    } else if (absl::StartsWith(arg, "-agentpath:") || absl::StartsWith(arg, "-agentlib:")) {
      o.agents.emplace_back(arg);
    } else if (arg == "--heap-profile" || arg == "--heap-profile=") {
      return absl::InvalidArgumentError(
          "--heap-profile needs a file: --heap-profile=FILE (e.g. --heap-profile=heap.pb.gz)");
    } else if (ValueOf(arg, "--heap-profile", &v)) {
      // Shorthand for the heapprof agent (docs/tools.md).
      if (v.find(',') != absl::string_view::npos) {
        return absl::InvalidArgumentError(
            "--heap-profile: expected a file name without ',' (e.g. --heap-profile=heap.pb.gz)");
      }
      o.agents.push_back(absl::StrCat("-agentlib:heapprof=file=", v));
    } else if (ValueOf(arg, "--tlab-size", &v)) {
      absl::StatusOr<size_t> s = ParseSize(std::string_view(v.data(), v.size()));
      if (!s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--tlab-size: ", s.status().message()));
      }
      if (*s < 64 || *s > (size_t{64} << 20)) {
        return absl::InvalidArgumentError("--tlab-size: must be between 64 and 64m bytes");
      }
      o.tlab_bytes = *s;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'"));
    }
  }
  if (o.young_bytes != 0 && o.young_bytes >= o.heap_bytes) {
    return absl::InvalidArgumentError(
        "--young: the young generation must be smaller than the heap");
  }
  if (o.help || o.version) return o;
  if (i >= argc) return absl::InvalidArgumentError("no program given (try --help)");
  o.program_path = argv[i++];
  for (; i < argc; ++i) o.program_args.emplace_back(argv[i]);
  return o;
}

std::string UsageText() {
  return R"(usage: minivm [options] program.mv [program arguments...]

Options come before the program; everything after it is the program's.

  --heap=<size>              maximum heap, e.g. 64m, 1g, 512k, or bytes (default 1g)
  --young=<size>             fixed young generation size (must be smaller than the heap;
                             default a third of it, eden growing from 32m as objects survive)
  --seed=<n>                 seed for rand and the heap sampler (default 0)
  --stack-depth=<n>          maximum call depth per thread (default 10000)
  --heap-profile=<file>      write a pprof heap profile at exit (-agentlib:heapprof; docs/tools.md)
  --tlab-size=<size>          fix every TLAB at this size (testing; default adaptive)
  --verbose:gc               one line per collection on stderr
  --verify-heap              check the whole heap before and after every collection
  --gc-stress=<n>            collect at every n-th allocation slow path (testing)
  --disassemble              print the program's bytecode instead of running it
  --jit=off|auto|eager       the JIT tier: interpreter only; compile hot functions
                             in the background (default); compile all quickly before
                             running, then hot functions again at --jit-opt
  --jit-threshold=<n>        calls + loop iterations before a function counts as hot
                             (default 1000)
  --jit-opt=<0..3>           how far LLVM optimises hot functions' code (default 2)
  --jit-sync                 compile a hot function on the thread that found it, before
                             going on (deterministic tiering, for tests; HotSpot's -Xbatch)
  --verbose:jit              one line per compiled (or failed) function and per OSR, on stderr
  --print-jit[=<function>]   print the LLVM IR of each compiled function on stderr
  --jit-memory=<size>        cap on compiled code memory (default 256m); past it, functions
                             stay interpreted
  --perf-map[=<file>]        write each compiled function's address range for Linux perf
                             to /tmp/perf-<pid>.map (or <file>), as it is compiled
  -agentpath:<path>[=<opts>] load an agent library
  -agentlib:<name>[=<opts>]  load lib<name>.so from the VM's agent folder
  --help                     this text
  --version                  the VM's version

Exit codes: 0 main returned, 1 runtime error, 2 compile error or bad command
line, n exit(n), 130 SIGINT (Ctrl-C), 143 SIGTERM, 131 SIGQUIT (when not an
attach request from minivm-attach). A signal ends the program
in order: agents write their outputs and stdout is flushed; a second signal
ends it at once.
)";
}

}  // namespace minivm
