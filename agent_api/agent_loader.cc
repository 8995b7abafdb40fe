#include "agent_api/agent_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace minivm::agent {
namespace {

std::string ExecutableDirectory() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace

std::string DefaultAgentDirectory() {
  const std::string exe_dir = ExecutableDirectory();
  const std::string installed = exe_dir + "/../lib/minivm";
  return Exists(installed) ? installed : exe_dir;
}

std::vector<std::string> AgentSearchPath() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("MINIVM_AGENT_PATH"); env != nullptr) {
    for (absl::string_view dir : absl::StrSplit(env, ':', absl::SkipEmpty())) {
      dirs.emplace_back(dir);
    }
  }
  dirs.push_back(DefaultAgentDirectory());
  return dirs;
}

absl::StatusOr<AgentSpec> ParseAgentOption(std::string_view option,
                                           const std::vector<std::string>& agent_dirs) {
  // Debian's Abseil has its own string_view type.
  const absl::string_view arg(option.data(), option.size());
  AgentSpec spec;
  absl::string_view rest;
  bool is_lib = false;
  if (absl::StartsWith(arg, "-agentpath:")) {
    rest = arg.substr(11);
  } else if (absl::StartsWith(arg, "-agentlib:")) {
    rest = arg.substr(10);
    is_lib = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("not an agent option: '", arg, "'"));
  }
  const size_t eq = rest.find('=');
  const absl::string_view target = rest.substr(0, eq);
  if (eq != absl::string_view::npos) {
    spec.options = std::string(rest.substr(eq + 1));
    spec.has_options = true;
  }
  if (target.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", arg, "': missing ", is_lib ? "library name" : "library path"));
  }
  if (!is_lib) {
    spec.path = std::string(target);
    return spec;
  }
  if (target.find('/') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", arg, "': -agentlib takes a name, not a path (use -agentpath)"));
  }
  const std::string file = absl::StrCat("lib", target, ".so");
  for (const std::string& dir : agent_dirs) {
    std::string candidate = absl::StrCat(dir, "/", file);
    if (Exists(candidate)) {
      spec.path = std::move(candidate);
      return spec;
    }
  }
  // The hint names the variable only when it is not set: the user who set
  // it sees its folders in the list.
  const bool path_set = std::getenv("MINIVM_AGENT_PATH") != nullptr;
  return absl::NotFoundError(absl::StrCat(
      "cannot load agent '", target, "': no ", file, " in ", absl::StrJoin(agent_dirs, ", "),
      path_set ? "" : " (MINIVM_AGENT_PATH adds folders; -agentpath takes a path)"));
}

absl::StatusOr<AgentLibrary> AgentLibrary::Open(const AgentSpec& spec, Entry entry) {
  // A relative path without a slash would make dlopen search the library
  // path; the user means a file relative to the current directory.
  std::string path = spec.path;
  if (path.find('/') == std::string::npos) path = "./" + path;
  // dlopen opens the file for blocking reads and holds the dynamic loader's
  // lock while it does: a FIFO with no writer, or a device that never
  // answers, would stop it there for ever, and with it every later dlopen
  // (every later attach) and whatever else takes that lock. Only a regular
  // file, reached through any symbolic links, is handed to dlopen; stat
  // never opens the file, so it cannot block or act on a device.
  // The check is made on the path dlopen then opens: whoever may write the
  // folders on that path can swap the file in between, and could as well
  // swap in another library, so a library there is unsafe to load anyway.
  // Rejected: dlopen of /proc/self/fd/N after an fstat of that descriptor.
  // The loader knows a library by that name, so a later load through the
  // same descriptor number would be handed the earlier library, and the
  // agent's own dladdr would name /proc/self/fd/N.
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot load agent '", spec.path, "': ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISDIR(st.st_mode)  ? "a folder"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a file";
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load agent '", spec.path, "': not a regular file (", what, ")"));
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(
        absl::StrCat("cannot load agent '", spec.path, "': ", why ? why : "unknown error"));
  }
  const char* const entry_name = entry == Entry::kOnLoad ? "Agent_OnLoad" : "Agent_OnAttach";
  auto on_load = reinterpret_cast<OnLoadFn>(dlsym(handle, entry_name));
  if (on_load == nullptr) {
    // Drops only this dlopen's reference: a library loaded before (by the
    // command line or an earlier attach) stays.
    dlclose(handle);
    return absl::NotFoundError(
        absl::StrCat("agent '", spec.path, "' does not export ", entry_name));
  }
  auto on_unload = reinterpret_cast<OnUnloadFn>(dlsym(handle, "Agent_OnUnload"));
  return AgentLibrary(spec, handle, on_load, on_unload, entry);
}

AgentLibrary::AgentLibrary(AgentLibrary&& other) noexcept
    : spec_(std::move(other.spec_)),
      handle_(std::exchange(other.handle_, nullptr)),
      on_load_(std::exchange(other.on_load_, nullptr)),
      on_unload_(std::exchange(other.on_unload_, nullptr)),
      entry_(other.entry_),
      options_buffer_(std::move(other.options_buffer_)) {}

AgentLibrary& AgentLibrary::operator=(AgentLibrary&& other) noexcept {
  spec_ = std::move(other.spec_);
  handle_ = std::exchange(other.handle_, nullptr);
  on_load_ = std::exchange(other.on_load_, nullptr);
  on_unload_ = std::exchange(other.on_unload_, nullptr);
  entry_ = other.entry_;
  options_buffer_ = std::move(other.options_buffer_);
  return *this;
}

AgentLibrary::~AgentLibrary() = default;

absl::Status AgentLibrary::Load(vmtiVM* vm) {
  // Agent_OnLoad takes a char*: JVMTI agents may tokenise it in place.
  options_buffer_ = spec_.options;
  char* options = spec_.has_options ? options_buffer_.data() : nullptr;
  const vmtiInt rc = on_load_(vm, options, nullptr);
  if (rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("agent '", spec_.path, "' failed to start: Agent_OnLoad returned ", rc));
  }
  return absl::OkStatus();
}

vmtiInt AgentLibrary::Attach(vmtiVM* vm) {
  options_buffer_ = spec_.options;
  char* options = spec_.has_options ? options_buffer_.data() : nullptr;
  return on_load_(vm, options, nullptr);
}

void AgentLibrary::Unload(vmtiVM* vm) {
  if (on_unload_ != nullptr) on_unload_(vm);
}

}  // namespace minivm::agent
