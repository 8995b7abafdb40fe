// The VM's side of the tool interface: lifecycle events the runtime reports.
// The agent API (agent_api/tool_interface.h) implements it; the runtime never
// includes agent_api/, and runs unchanged (hooks == nullptr) without agents.
#ifndef MINIVM_VM_RUNTIME_TOOL_HOOKS_H_
#define MINIVM_VM_RUNTIME_TOOL_HOOKS_H_

#include "gc/vm_interface.h"

namespace minivm {

struct VMThread;

class ToolHooks {
 public:
  virtual ~ToolHooks() = default;
  // On the main thread, attached, before the global initialisers run.
  virtual void OnVMInit(VMThread* main) = 0;
  // On the thread ending the VM, with every other thread stopped for good;
  // the last event. Called at most once. `current` is null when that thread
  // is not a VM thread (the signal dispatcher's shutdown, SIGINT/SIGTERM).
  virtual void OnVMDeath(VMThread* current) = 0;
  // On a spawned thread, attached, before its function runs.
  virtual void OnThreadStart(VMThread* thread) = 0;
  // On a spawned thread, after its function returned, still attached.
  virtual void OnThreadEnd(VMThread* thread) = 0;
  // Root slots the tool holds (objects it handed to an agent for longer
  // than one callback), visited with the VM's global roots inside a pause.
  virtual void VisitToolRoots(gc::RootVisitor& /*visitor*/) {}
};

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_TOOL_HOOKS_H_
