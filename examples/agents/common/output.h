// Small output helpers shared by the tool agents.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_OUTPUT_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_OUTPUT_H_

#include <cstdint>
#include <string>

namespace agent {

// Writes `data` to `path` through a temporary file and rename(), so a reader
// never sees half a file. Returns false (errno set) on failure.
bool WriteFileAtomic(const std::string& path, const std::string& data);

// "12.3 MiB", "512 B".
std::string HumanBytes(double bytes);

// Wall-clock nanoseconds since the epoch (pprof's time_nanos).
int64_t WallNanos();

// "heap.pb.gz" + 3 -> "heap.0003.pb.gz"; "out.folded" -> "out.0003.folded";
// "out" -> "out.0003". The number goes before ".pb.gz", else before the
// last extension.
std::string NumberedPath(const std::string& path, int n);

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_OUTPUT_H_
