#include "agent_api/environment.h"

#include <new>

#include "agent_api/functions.h"

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
  if ((capable_events.load(std::memory_order_acquire) & EventBit(e)) == 0) return false;
  return EventEnabledFor(e, thread);
}

bool Environment::EventEnabledFor(vmtiEvent e, const VMThread* thread) {
  const uint64_t bit = EventBit(e);
  if ((global_events.load(std::memory_order_acquire) & bit) != 0) return true;
  if (thread == nullptr || (any_thread_events.load(std::memory_order_acquire) & bit) == 0) {
    return false;
  }
  base::MutexLock lock(&mu);
  auto it = thread_events.find(thread);
  return it != thread_events.end() && (it->second & bit) != 0;
}

Environment::Environment(const vmtiInterface_1* table, ToolInterface* t, int slot)
    : functions(table), tool(t), id(slot) {
  base::MutexLock lock(&mu);
  CapabilitiesChangedLocked();  // the events that need no capability
}

void Environment::CapabilitiesChangedLocked() {
  uint64_t bits = 0;
  for (int e = VMTI_MIN_EVENT_TYPE_VAL; e <= VMTI_MAX_EVENT_TYPE_VAL; ++e) {
    if (IsKnownEvent(e) && HasCapabilityFor(capabilities, static_cast<vmtiEvent>(e))) {
      bits |= EventBit(static_cast<vmtiEvent>(e));
    }
  }
  capable_events.store(bits, std::memory_order_release);
}

void Environment::ThreadEventsChangedLocked() {
  uint64_t bits = 0;
  for (const auto& [thread, mask] : thread_events) bits |= mask;
  any_thread_events.store(bits, std::memory_order_release);
}

void Environment::Reset(uint64_t new_serial) {
  {
    base::MutexLock lock(&mu);
    capabilities = vmtiCapabilities{};
    callbacks = vmtiEventCallbacks{};
    thread_events.clear();
    ThreadEventsChangedLocked();
    CapabilitiesChangedLocked();
  }
  global_events.store(0, std::memory_order_relaxed);
  interval.store(gc::kDefaultSamplingInterval, std::memory_order_relaxed);
  local_storage.store(nullptr, std::memory_order_relaxed);
  serial.store(new_serial, std::memory_order_relaxed);
  disposed.store(false, std::memory_order_release);
}

EnvironmentPool& EnvironmentPool::Get() {
  // Never destroyed: agents' threads may still call in during exit.
  static EnvironmentPool* const pool = new EnvironmentPool;
  return *pool;
}

EnvironmentPool::EnvironmentPool()
    // Raw storage: pages no slot was constructed in are never touched.
    : slots_(static_cast<Environment*>(::operator new(
          sizeof(Environment) * kCapacity, std::align_val_t{alignof(Environment)}))) {}

Environment* EnvironmentPool::Acquire(ToolInterface* tool, uint64_t serial) {
  base::MutexLock lock(&mu_);
  // Oldest first, past the cooldown; any disposed slot when nothing else is
  // left (.pool.cooldown).
  const bool full = made_.load(std::memory_order_relaxed) == kCapacity;
  if (queue_.size() > static_cast<size_t>(kCooldown) || full) {
    const size_t eligible = full ? queue_.size() : queue_.size() - kCooldown;
    for (size_t i = 0; i < eligible; ++i) {
      Environment* env = &slots_[queue_[i]];
      if (env->tool != tool || !env->tags.Empty()) continue;
      queue_.erase(queue_.begin() + static_cast<ptrdiff_t>(i));
      env->tags.Release();
      env->Reset(serial);
      return env;
    }
  }
  if (full) return nullptr;
  const int id = made_.load(std::memory_order_relaxed);
  Environment* env = new (&slots_[id]) Environment(&FunctionTable(), tool, id);
  env->serial.store(serial, std::memory_order_relaxed);
  made_.store(id + 1, std::memory_order_release);
  return env;
}

void EnvironmentPool::Release(Environment* env) {
  base::MutexLock lock(&mu_);
  queue_.push_back(env->id);
}

Environment* EnvironmentPool::Find(const void* candidate) const {
  const auto p = reinterpret_cast<uintptr_t>(candidate);
  const auto base = reinterpret_cast<uintptr_t>(slots_);
  if (p < base) return nullptr;
  const uintptr_t offset = p - base;
  if (offset % sizeof(Environment) != 0) return nullptr;
  const uintptr_t id = offset / sizeof(Environment);
  if (id >= static_cast<uintptr_t>(made_.load(std::memory_order_acquire))) return nullptr;
  return &slots_[id];
}

Environment* EnvironmentPool::At(int id) const {
  if (id < 0 || id >= made_.load(std::memory_order_acquire)) return nullptr;
  return &slots_[id];
}

vmtiEventCallbacks Environment::Callbacks() {
  base::MutexLock lock(&mu);
  return callbacks;
}

vmtiCapabilities Environment::Capabilities() {
  base::MutexLock lock(&mu);
  return capabilities;
}

}  // namespace minivm::agent
