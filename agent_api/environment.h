// One VMTI environment: what GetEnv hands an agent. Its first member is the
// function-table pointer, so an Environment* is the agent's vmtiEnv*.
//
// Each environment has its own capabilities, callbacks, event switches, tags
// and local storage (GetEnv makes independent environments). Environments are
// never freed while the VM lives: DisposeEnvironment only marks one disposed,
// so a pointer an agent still holds stays safe to reject.
#ifndef MINIVM_AGENT_API_ENVIRONMENT_H_
#define MINIVM_AGENT_API_ENVIRONMENT_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "gc/sync.h"
#include "agent_api/check.h"
#include "agent_api/tags.h"
#include "vmti/vmti.h"

namespace minivm {
struct VMThread;
}

namespace minivm::agent {

class ToolInterface;

// Bit for an event number in the enable masks.
inline uint64_t EventBit(vmtiEvent e) {
  static_assert(VMTI_MAX_EVENT_TYPE_VAL - VMTI_MIN_EVENT_TYPE_VAL < 64);
  // Callers pass events that IsKnownEvent accepted, or constants.
  MINIVM_AGENT_DCHECK(e >= VMTI_MIN_EVENT_TYPE_VAL && e <= VMTI_MAX_EVENT_TYPE_VAL,
                      "event %d out of range", static_cast<int>(e));
  return uint64_t{1} << (static_cast<int>(e) - VMTI_MIN_EVENT_TYPE_VAL);
}
bool IsKnownEvent(int e);
// Whether `c` holds the capability `event` needs (most events need none).
bool HasCapabilityFor(const vmtiCapabilities& c, vmtiEvent event);

struct Environment {
  // Offset 0: the agent's vmtiEnv* points here.
  const vmtiInterface_1* functions;

  ToolInterface* tool;
  int id;  // creation order, from 0

  std::atomic<bool> disposed{false};
  std::atomic<const void*> local_storage{nullptr};

  // Capabilities, as a plain copy (read under mu, or racily for fast checks
  // of bits that only this env's own calls change).
  gc::Mutex mu;
  vmtiCapabilities capabilities ABSL_GUARDED_BY(mu){};
  vmtiEventCallbacks callbacks ABSL_GUARDED_BY(mu){};

  // Events enabled for every thread, and per thread. An event reaches this
  // env on thread T iff its bit is in global_events or in thread_events[T].
  std::atomic<uint64_t> global_events{0};
  absl::flat_hash_map<const VMThread*, uint64_t> thread_events ABSL_GUARDED_BY(mu);

  TagMap tags;

  Environment(const vmtiInterface_1* table, ToolInterface* t, int n)
      : functions(table), tool(t), id(n) {}

  bool EventEnabledFor(vmtiEvent e, const VMThread* thread);
  // Whether event `e` on `thread` (null: none) reaches this env: not
  // disposed, holding the capability the event needs, and the event
  // enabled. Every dispatch asks this, never the enable bits alone:
  // RelinquishCapabilities leaves the bits set (adding the capability back
  // resumes the event), and another env may keep the sampler running.
  bool ShouldPost(vmtiEvent e, const VMThread* thread);
  // A copy of the callbacks (callbacks are invoked without holding mu).
  vmtiEventCallbacks Callbacks();
  vmtiCapabilities Capabilities();

  static Environment* FromVmti(vmtiEnv* env) { return reinterpret_cast<Environment*>(env); }
  vmtiEnv* AsVmti() { return reinterpret_cast<vmtiEnv*>(this); }
};

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_ENVIRONMENT_H_
