#include "agent_api/environment.h"

namespace minivm::agent {

bool IsKnownEvent(int e) {
  switch (e) {
    case VMTI_EVENT_VM_INIT:
    case VMTI_EVENT_VM_DEATH:
    case VMTI_EVENT_THREAD_START:
    case VMTI_EVENT_THREAD_END:
    case VMTI_EVENT_GARBAGE_COLLECTION_START:
    case VMTI_EVENT_GARBAGE_COLLECTION_FINISH:
    case VMTI_EVENT_OBJECT_FREE:
    case VMTI_EVENT_SAMPLED_OBJECT_ALLOC:
    case VMTI_EVENT_OBJECT_PROMOTE:
      return true;
    default:
      return false;
  }
}

bool HasCapabilityFor(const vmtiCapabilities& c, vmtiEvent event) {
  switch (event) {
    case VMTI_EVENT_SAMPLED_OBJECT_ALLOC:
      return c.can_generate_sampled_alloc_events;
    case VMTI_EVENT_OBJECT_FREE:
      return c.can_generate_object_free_events;
    case VMTI_EVENT_OBJECT_PROMOTE:
      return c.can_generate_object_promote_events;
    case VMTI_EVENT_GARBAGE_COLLECTION_START:
    case VMTI_EVENT_GARBAGE_COLLECTION_FINISH:
      return c.can_generate_garbage_collection_events;
    default:
      return true;
  }
}

bool Environment::ShouldPost(vmtiEvent e, const VMThread* thread) {
  if (disposed.load(std::memory_order_acquire)) return false;
  if (!HasCapabilityFor(Capabilities(), e)) return false;
  return EventEnabledFor(e, thread);
}

bool Environment::EventEnabledFor(vmtiEvent e, const VMThread* thread) {
  const uint64_t bit = EventBit(e);
  if ((global_events.load(std::memory_order_acquire) & bit) != 0) return true;
  if (thread == nullptr) return false;
  gc::MutexLock lock(&mu);
  auto it = thread_events.find(thread);
  return it != thread_events.end() && (it->second & bit) != 0;
}

vmtiEventCallbacks Environment::Callbacks() {
  gc::MutexLock lock(&mu);
  return callbacks;
}

vmtiCapabilities Environment::Capabilities() {
  gc::MutexLock lock(&mu);
  return capabilities;
}

}  // namespace minivm::agent
