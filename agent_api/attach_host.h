// The agent API's side of attach (vm/runtime/attach_listener.h): loads
// agents into the running VM with Agent_OnAttach, and describes them.
#ifndef MINIVM_AGENT_API_ATTACH_HOST_H_
#define MINIVM_AGENT_API_ATTACH_HOST_H_

#include <memory>
#include <string>
#include <string_view>

#include "agent_api/tool_interface.h"
#include "vm/runtime/attach_listener.h"

namespace minivm::agent {

class AttachHost final : public AttachAgentHost {
 public:
  // `tools`: the VM's ToolInterface when agents were loaded at start-up, or
  // null: one is then made at the first load and registered live.
  AttachHost(VM* vm, ToolInterface* tools) : vm_(vm), tools_(tools) {}

  // SPEC is PATH_OR_NAME[=OPTIONS]: with a '/', a library path (as
  // -agentpath:), else a name looked up as -agentlib: does. The agent's
  // stderr during Agent_OnAttach is passed through to the VM's stderr and
  // also returned: the last line is the agent's one-line error on failure.
  bool LoadAgent(std::string_view spec, std::string* reply) override;
  std::string DescribeAgents() override;
  std::string DescribeSampling() override;
  // Puts the VM's real stderr back on descriptor 2 if an Agent_OnAttach is
  // still running with it on a pipe, and waits (at most 1 s) until what
  // was written to the pipe has been copied there.
  void BeforeExit() override;

 private:
  VM* const vm_;
  // Only the attach listener's thread calls in, one request at a time.
  ToolInterface* tools_;
  std::unique_ptr<ToolInterface> owned_;
};

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_ATTACH_HOST_H_
