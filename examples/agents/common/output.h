// Small output helpers shared by the tool agents.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_OUTPUT_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_OUTPUT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "options.h"

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
//    /dev/full, EIO, EPIPE) is an error;
//  - a FIFO is never waited for: WriteOutput fails at once when no process
//    has it open for reading (a wait would hold the VM's end for ever), and
//    writes to a reader that is there. OutputStream::Open, which runs when
//    the agent loads, before the program starts, does wait for a reader.

// Checks that `path` can be written: it is not empty and not a directory;
// for a regular file or a new name its directory exists and is writable;
// anything else can be opened for writing. On failure *error says why in a
// few words ("directory /x does not exist"), to follow "cannot write PATH: ".
bool CheckOutputPath(const std::string& path, std::string* error);

// Declares an option naming an output file (file=, trace=), checked with
// CheckOutputPath as it is parsed: "<agent>: bad option 'file=PATH': cannot
// write PATH: <reason>".
void DeclareOutputOption(OptionParser* options, const char* key, std::string* out);

// Writes `data` to `path` as described above. On failure *error is
// "cannot write PATH: <reason>" and nothing at PATH was changed (a device
// or FIFO may have received part of the data).
bool WriteOutput(const std::string& path, const std::string& data, std::string* error);

// A stream output (an event trace, written as events arrive): opened in
// place when the agent loads, so that the program never starts with an
// output that cannot be opened, and never replaced (a regular file is
// truncated, a symlink followed, a device or FIFO written as it is).
// Writes are buffered; the first write error is kept, later writes are
// dropped, and Close() reports it, so a trace that was cut short is never
// passed off as complete. A write to a pipe whose reader has gone fails
// with EPIPE instead of raising SIGPIPE in the program's process.
// Not thread-safe: the owner serialises calls.
class OutputStream {
 public:
  OutputStream() = default;
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;
  ~OutputStream();

  // CheckOutputPath, then opens `path`. On failure *error is
  // "cannot write PATH: <reason>".
  bool Open(const std::string& path, std::string* error);
  bool is_open() const { return fd_ >= 0; }
  void Write(std::string_view data);
  // Flushes and closes. False, with *error = "cannot write PATH: <reason>
  // (after N bytes)", if any write (or the close) failed.
  bool Close(std::string* error);
  // Bytes the kernel accepted.
  int64_t written() const { return written_; }

 private:
  void Flush();

  std::string path_;
  int fd_ = -1;
  int error_ = 0;  // the first errno of a failed write; 0 if none
  int64_t written_ = 0;
  std::string buffer_;
};

// An output that could not be written fails the run: the agent calls
// NoteOutputFailed when it reports the failure, and its Agent_OnUnload
// calls ExitIfOutputFailed, which (after every agent's VMDeath, so no other
// agent loses its outputs) flushes stdio and ends the process with status 1.
// The state is per agent library (each links its own copy of this code).
void NoteOutputFailed();
void ExitIfOutputFailed();

// Emits a text report: on stderr if `file` is empty, else as the whole
// content of `file` (WriteOutput: the file always holds one complete
// report, the latest). A report that could not be written goes to stderr
// after one line saying why, and the run will fail (NoteOutputFailed).
void EmitReport(const char* agent, const std::string& file, const std::string& report);

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
