// What the profiled process is running, for profiles that say what they
// profiled: the program's path and arguments, read from /proc/self/cmdline
// (minivm's options are single `-x` / `--x=v` words before the program, so
// the program is the first word that does not start with '-'), and source
// file names made relative to the program's directory.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_PROGRAM_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_PROGRAM_H_

#include <string>
#include <vector>

namespace agent {

struct ProgramInfo {
  std::string path;          // as given on the command line ("" if none found)
  std::string dir;           // its directory, absolute ("" if unknown)
  std::vector<std::string> args;  // the program's own arguments
  std::string command_line;  // the whole command line, words joined by spaces
};

// Reads the current process's command line once (later calls return the
// first result). Never fails: what cannot be read is left empty.
const ProgramInfo& CurrentProgram();

// `file` (a source path as the VM reports it, relative to the working
// directory or absolute) relative to info.dir when it lies under it;
// otherwise `file` unchanged. "examples/programs/a.mv" -> "a.mv".
std::string RelativeToProgram(const ProgramInfo& info, const std::string& file);

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_PROGRAM_H_
