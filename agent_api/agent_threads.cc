// RunAgentThread: JVMTI's agent threads, with a name instead of a Thread
// object (tool_interface.h, .agent-threads).
//
// An agent thread is a VMThread the VM knows (GetAllThreads, GetThreadInfo
// with its name, ThreadStart/ThreadEnd, per-thread event control) that runs
// the agent's native function. It has no language frames (GetStackTrace and
// GetFrameCount give 0 frames; it is not a language thread, so
// GetAllStackTraces leaves it out) and no parent. It is never attached to the
// heap, so it never holds up a safepoint; ForceGarbageCollection and the
// other heap requests work from it as from any outside thread. It is a
// daemon: the VM does not wait for proc to return, neither before VMDeath
// nor before the process ends. Once VM death begins it gets no ThreadEnd,
// its RawMonitorWaits return VMTI_ERROR_INTERRUPT, and after VMDeath its
// LIVE-phase calls give WRONG_PHASE. The process may end while proc still
// runs: nothing proc can reach is freed under it (the VM and the agent
// libraries are never destroyed or unloaded with exit_process).
#include <string>

#include "agent_api/environment.h"
#include "agent_api/tool_interface.h"
#include "vm/runtime/thread.h"
#include "vm/runtime/vm.h"

namespace minivm::agent {

vmtiError ToolInterface::RunAgentThread(Environment* env, const char* name, vmtiStartFunction proc,
                                        const void* arg, vmtiThread* thread_ptr) {
  absl::StatusOr<VMThread*> started =
      vm_->StartAgentThread(name, [this, env, proc, arg](VMThread* t) {
        CurrentAgentThreadState().thread = t;
        OnThreadStart(t);  // none once VM death began (EventsStoppedHere)
        proc(env->AsVmti(), const_cast<void*>(arg));
        OnThreadEnd(t);
      });
  if (!started.ok()) return VMTI_ERROR_OUT_OF_MEMORY;  // no thread or no stack to be had
  if (thread_ptr != nullptr) *thread_ptr = reinterpret_cast<vmtiThread>(*started);
  return VMTI_ERROR_NONE;
}

}  // namespace minivm::agent
