// minivm-collector: receives heap samples from VMs running the remote agent
// (-agentlib:remote=socket=PATH) over shared memory and writes one pprof
// heap profile per VM. docs/collector.md.
//
//   minivm-collector --socket=PATH --out=DIR [--period=SECONDS]
//                    [--buffer=BYTES] [--max-clients=N]
//
// The command line is parsed by hand with the agents' option helpers
// (examples/agents/common/options.h) rather than absl::flags: five options,
// and errors must be one line naming the option, like the agents'.
#include <cstdio>
#include <cstring>
#include <string>

#include "../agents/common/options.h"
#include "collector.h"

namespace {

constexpr const char* kUsage =
    "usage: minivm-collector --socket=PATH --out=DIR [--period=SECONDS] [--buffer=BYTES] "
    "[--max-clients=N]\n";

int Bad(const std::string& arg, const char* why) {
  std::fprintf(stderr, "minivm-collector: bad argument '%s': %s\n", arg.c_str(), why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  collector::CollectorOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (eq == std::string::npos) return Bad(arg, "want --name=value (see --help)");
    if (key == "--socket") {
      if (value.empty()) return Bad(arg, "want a socket path");
      o.socket_path = value;
    } else if (key == "--out") {
      if (value.empty()) return Bad(arg, "want a directory");
      o.out_dir = value;
    } else if (key == "--period") {
      if (!agent::ParseDouble(value, 0.001, 86400.0 * 365, &o.period_seconds)) {
        return Bad(arg, "want seconds > 0, e.g. 10 or 0.5");
      }
    } else if (key == "--buffer") {
      int64_t bytes = 0;
      if (!agent::ParseBytes(value, 0, INT64_MAX, &bytes) ||
          !collector::ValidRingBytes(static_cast<uint64_t>(bytes))) {
        return Bad(arg, "want a power of two from 4k to 256m");
      }
      o.ring_bytes = static_cast<uint64_t>(bytes);
    } else if (key == "--max-clients") {
      if (!agent::ParseInt(value, 1, 1000, &o.max_clients)) {
        return Bad(arg, "want a count from 1 to 1000");
      }
    } else {
      return Bad(arg, "unknown option (known: --socket, --out, --period, --buffer, --max-clients)");
    }
  }
  if (o.socket_path.empty() || o.out_dir.empty()) {
    std::fprintf(stderr, "minivm-collector: --socket and --out are required (see --help)\n");
    return 2;
  }
  // Before any thread exists, so that every thread inherits the mask and the
  // signals reach only the signalfd.
  collector::Collector::BlockSignals();
  collector::Collector c(o);
  std::string error;
  if (!c.Start(&error)) {
    std::fprintf(stderr, "minivm-collector: %s\n", error.c_str());
    return 1;
  }
  return c.Run();
}
