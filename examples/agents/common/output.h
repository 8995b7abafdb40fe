// Small output helpers shared by the tool agents.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_OUTPUT_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_OUTPUT_H_

#include <cstdint>
#include <string>

namespace agent {

// Output files. Every path an agent (or the collector) will write is
// checked when it loads, so that a typo fails before the program runs
// rather than after it (CheckOutputPath), and written so that a reader
// never sees half a file and an error is never silent (WriteOutput):
//  - a symlink is followed (up to 40 links), and what follows applies to
//    its target;
//  - a regular file, or a name that does not exist yet, is written to a
//    temporary file in the same directory and renamed over the name;
//  - anything else (a device such as /dev/null or /dev/stdout, a FIFO) is
//    written in place, never replaced, and a failed write (ENOSPC on
//    /dev/full, EIO, EPIPE) is an error.

// Checks that `path` can be written: it is not empty and not a directory;
// for a regular file or a new name its directory exists and is writable;
// anything else can be opened for writing. On failure *error says why in a
// few words ("directory /x does not exist"), to follow "cannot write PATH: ".
bool CheckOutputPath(const std::string& path, std::string* error);

// Writes `data` to `path` as described above. On failure *error is
// "cannot write PATH: <reason>" and nothing at PATH was changed (a device
// or FIFO may have received part of the data).
bool WriteOutput(const std::string& path, const std::string& data, std::string* error);

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
