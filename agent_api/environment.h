// One VMTI environment: what GetEnv hands an agent. Its first member is the
// function-table pointer, so an Environment* is the agent's vmtiEnv*.
//
// Each environment has its own capabilities, callbacks, event switches, tags
// and local storage (GetEnv makes independent environments).
//
// Design
// ------
// .pool  Environments live in one process-wide pool of slots
//   (EnvironmentPool), constructed on first use and recycled after
//   DisposeEnvironment: a process may create and dispose environments
//   without limit, and holds at most kCapacity at once. The pool's storage is
//   one block, so any pointer an agent passes is checked by address
//   arithmetic alone (Find), never dereferenced first: a forged pointer is
//   rejected, and a disposed one stays valid memory.
// .pool.cooldown  A disposed slot is recycled only once kCooldown later
//   disposals have queued behind it, and only once its tag map is empty (no
//   event about one of its objects is still to be handled: tags.h,
//   .record.reuse). Until then its pointer is rejected
//   (VMTI_ERROR_INVALID_ENVIRONMENT); after that it may name a new
//   environment, as JVMTI leaves use after DisposeEnvironment undefined.
// .pool.slot  `id` is the slot: tag cookies name it, so a recycled slot can
//   never receive an event about an object its previous environment tagged
//   (the tag map was empty). `serial` names the environment to people
//   (`minivm-attach agents`): it is never reused.
// .post  Whether an event reaches an environment is read from atomics
//   (disposed, capable_events, global_events, any_thread_events) without a
//   lock; only an event enabled for some threads alone looks up the
//   per-thread map, under mu.
#ifndef MINIVM_AGENT_API_ENVIRONMENT_H_
#define MINIVM_AGENT_API_ENVIRONMENT_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "agent_api/check.h"
#include "agent_api/tags.h"
#include "base/sync.h"
#include "gc/sampler.h"
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

  ToolInterface* const tool;
  const int id;  // the pool slot (.pool.slot)
  std::atomic<uint64_t> serial{0};  // creation number in its ToolInterface, from 0

  std::atomic<bool> disposed{false};
  std::atomic<const void*> local_storage{nullptr};

  // Capabilities, as a plain copy (read under mu, or racily for fast checks
  // of bits that only this env's own calls change).
  base::Mutex mu;
  vmtiCapabilities capabilities ABSL_GUARDED_BY(mu){};
  vmtiEventCallbacks callbacks ABSL_GUARDED_BY(mu){};

  // Events enabled for every thread, and per thread. An event reaches this
  // env on thread T iff its bit is in global_events or in thread_events[T].
  std::atomic<uint64_t> global_events{0};
  absl::flat_hash_map<const VMThread*, uint64_t> thread_events ABSL_GUARDED_BY(mu);
  // The union of thread_events' masks (a superset once a thread's bits are
  // cleared: it only tells when the map need not be looked at).
  std::atomic<uint64_t> any_thread_events{0};
  // Events whose capability the environment holds (HasCapabilityFor).
  std::atomic<uint64_t> capable_events{0};
  // This environment's sampling interval (SetHeapSamplingInterval): its
  // SampledObjectAlloc events are a Poisson process at this interval,
  // whatever the other environments ask for (tool_interface.h .interval).
  std::atomic<int32_t> interval{gc::kDefaultSamplingInterval};

  TagMap tags;

  Environment(const vmtiInterface_1* table, ToolInterface* t, int slot);

  // After capabilities changed (with mu held): recomputes capable_events.
  void CapabilitiesChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // After thread_events changed (with mu held): recomputes any_thread_events.
  void ThreadEventsChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Back to a new environment's state, for a recycled slot.
  void Reset(uint64_t new_serial);

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

// The process-wide slots environments live in (.pool).
class EnvironmentPool {
 public:
  static constexpr int kCapacity = 8192;
  static constexpr int kCooldown = 64;

  static EnvironmentPool& Get();

  // A new environment of `tool`: a recycled slot or a fresh one; null when
  // kCapacity environments are live or still have events to handle.
  Environment* Acquire(ToolInterface* tool, uint64_t serial);
  // After DisposeEnvironment: the slot joins the recycling queue.
  void Release(Environment* env);
  // The slot `candidate` points at, or null for anything that is not one
  // (disposed slots included: the caller checks `disposed`).
  Environment* Find(const void* candidate) const;
  // Slot `id` if it was ever constructed, else null.
  Environment* At(int id) const;

 private:
  EnvironmentPool();
  Environment* slots_;  // kCapacity slots' storage, constructed below `made_`
  std::atomic<int> made_{0};
  base::Mutex mu_;
  std::vector<int> queue_ ABSL_GUARDED_BY(mu_);  // disposed slots, oldest first
};

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_ENVIRONMENT_H_
