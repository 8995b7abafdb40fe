// Loading agent libraries: -agentpath:<path>[=<options>] and
// -agentlib:<name>[=<options>] (lib<name>.so in the VM's agent folder).
#ifndef MINIVM_AGENT_API_AGENT_LOADER_H_
#define MINIVM_AGENT_API_AGENT_LOADER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "vmti/vmti.h"

namespace minivm::agent {

// One -agentpath/-agentlib option as written on the command line.
struct AgentSpec {
  std::string path;     // resolved library path
  std::string options;  // text after '=', empty if none
  bool has_options = false;
};

// Parses "-agentpath:<path>[=<opts>]" or "-agentlib:<name>[=<opts>]".
// -agentlib takes lib<name>.so from the first folder of `agent_dirs` that
// has it; if none has it, the error names the file and every folder.
// Errors name the option.
absl::StatusOr<AgentSpec> ParseAgentOption(std::string_view arg,
                                           const std::vector<std::string>& agent_dirs);

// The VM's own agent folder: `<dir of the minivm executable>/../lib/minivm`
// if it exists (an installed VM), else the executable's folder (build trees).
std::string DefaultAgentDirectory();

// The folders -agentlib searches, in order: each folder of the
// colon-separated MINIVM_AGENT_PATH (empty entries skipped), then
// DefaultAgentDirectory().
std::vector<std::string> AgentSearchPath();

// A loaded library with its entry points.
class AgentLibrary {
 public:
  using OnLoadFn = vmtiInt (*)(vmtiVM*, char*, void*);
  using OnUnloadFn = void (*)(vmtiVM*);
  // Which entry point starts the agent: Agent_OnLoad (command line, phase
  // ONLOAD) or Agent_OnAttach (a running VM, phase LIVE). Same signature.
  enum class Entry { kOnLoad, kOnAttach };

  // dlopen + dlsym of the entry point; "Agent_OnUnload" is optional.
  // Errors are one line naming the path.
  static absl::StatusOr<AgentLibrary> Open(const AgentSpec& spec, Entry entry = Entry::kOnLoad);

  AgentLibrary(AgentLibrary&& other) noexcept;
  AgentLibrary& operator=(AgentLibrary&& other) noexcept;
  AgentLibrary(const AgentLibrary&) = delete;
  AgentLibrary& operator=(const AgentLibrary&) = delete;
  ~AgentLibrary();  // never dlcloses: agent threads or atexit hooks may outlive us

  // Calls Agent_OnLoad with a private, writable copy of the options.
  // A non-zero return is an error naming the agent.
  absl::Status Load(vmtiVM* vm);
  // Calls Agent_OnAttach likewise (a library opened with Entry::kOnAttach)
  // and returns what it returned.
  vmtiInt Attach(vmtiVM* vm);
  void Unload(vmtiVM* vm);

  const AgentSpec& spec() const { return spec_; }
  bool attached() const { return entry_ == Entry::kOnAttach; }

 private:
  AgentLibrary(AgentSpec spec, void* handle, OnLoadFn on_load, OnUnloadFn on_unload, Entry entry)
      : spec_(std::move(spec)),
        handle_(handle),
        on_load_(on_load),
        on_unload_(on_unload),
        entry_(entry) {}

  AgentSpec spec_;
  void* handle_ = nullptr;
  OnLoadFn on_load_ = nullptr;
  OnUnloadFn on_unload_ = nullptr;
  Entry entry_ = Entry::kOnLoad;  // on_load_ is Agent_OnAttach for kOnAttach
  std::string options_buffer_;
};

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_AGENT_LOADER_H_
