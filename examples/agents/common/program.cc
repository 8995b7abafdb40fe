#include "program.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

namespace agent {
namespace {

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == nullptr) return std::string();
  std::string base = cwd;
  if (base != "/") base += '/';
  return path.compare(0, 2, "./") == 0 ? base + path.substr(2) : base + path;
}

ProgramInfo Read() {
  ProgramInfo info;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == '\0') {
      words.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  }
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) info.command_line += ' ';
    info.command_line += words[i];
  }
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i].empty() || words[i][0] == '-') continue;
    info.path = words[i];
    info.args.assign(words.begin() + static_cast<long>(i) + 1, words.end());
    break;
  }
  if (!info.path.empty()) {
    // The directory as the user sees it (symlinks resolved, so that a
    // file reported through another spelling of it still matches).
    char resolved[PATH_MAX];
    std::string abs = realpath(info.path.c_str(), resolved) != nullptr ? resolved
                                                                        : Absolute(info.path);
    const size_t slash = abs.rfind('/');
    if (slash != std::string::npos) info.dir = slash == 0 ? "/" : abs.substr(0, slash);
  }
  return info;
}

}  // namespace

const ProgramInfo& CurrentProgram() {
  static const ProgramInfo* info = new ProgramInfo(Read());  // never destroyed: see agent.h
  return *info;
}

std::string RelativeToProgram(const ProgramInfo& info, const std::string& file) {
  if (info.dir.empty() || file.empty()) return file;
  char resolved[PATH_MAX];
  const std::string abs = realpath(file.c_str(), resolved) != nullptr ? resolved : Absolute(file);
  const std::string prefix = info.dir == "/" ? "/" : info.dir + "/";
  if (abs.size() > prefix.size() && abs.compare(0, prefix.size(), prefix) == 0) {
    return abs.substr(prefix.size());
  }
  return file;
}

}  // namespace agent
