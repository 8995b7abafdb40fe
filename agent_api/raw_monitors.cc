#include "agent_api/raw_monitors.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "agent_api/thread_states.h"
#include "agent_api/tool_interface.h"
#include "gc/heap.h"
#include "vm/runtime/thread.h"

namespace minivm::agent {
namespace {

// ---- Blocking ------------------------------------------------------------
// Every blocking step (waiting for the monitor to be free, waiting for a
// notification) runs in a SafepointSafeScope (agent_api/thread_states.h
// .safepoint-safe), so a thread blocked here never holds up a safepoint
// (raw_monitors.h .safepoints).
// The monitor itself is always taken after the scope has ended: leaving it
// may wait for a collection, and a thread must not wait out a collection
// while holding a monitor that GarbageCollectionStart/Finish may enter.

// ---- Threads as owners ---------------------------------------------------
// An owner is an OS thread, named by a process-wide number that is never
// reused (a thread's address or std::thread::id may be, once it ends).
std::atomic<uint64_t> g_next_thread_id{1};
uint64_t SelfId() {
  thread_local const uint64_t id = g_next_thread_id.fetch_add(1, std::memory_order_relaxed);
  return id;
}

std::atomic<bool> g_agent_waits_interrupted{false};

bool InterruptedHere() {
  if (!g_agent_waits_interrupted.load(std::memory_order_acquire)) return false;
  const VMThread* t = CurrentAgentThreadState().thread;
  return t != nullptr && t->agent_thread;
}

// ---- Monitors ------------------------------------------------------------

struct RawMonitor {
  explicit RawMonitor(std::string n) : name(std::move(n)) {}

  const std::string name;  // for debugging: JVMTI has no getter
  std::mutex mu;
  // One condition for everything a thread may wait for here: the monitor
  // becoming free, a notification, destruction, an interrupt. Waiters
  // re-check their own predicate, so a broadcast is always correct.
  std::condition_variable cv;
  uint64_t owner = 0;      // SelfId() of the owner, 0 if free; guarded by mu
  int recursions = 0;      // guarded by mu
  bool destroyed = false;  // guarded by mu
  struct Waiter {
    bool notified = false;
  };
  std::list<Waiter*> wait_set;  // RawMonitorWait callers, oldest first; guarded by mu
};

// Lock order: g_registry_mu, then a monitor's mu.
std::mutex g_registry_mu;
absl::flat_hash_map<uintptr_t, std::shared_ptr<RawMonitor>>& Registry() {
  static auto* registry = new absl::flat_hash_map<uintptr_t, std::shared_ptr<RawMonitor>>();
  return *registry;
}
uintptr_t g_next_monitor = 1;  // guarded by g_registry_mu

std::shared_ptr<RawMonitor> Lookup(vmtiRawMonitorID handle) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto it = Registry().find(reinterpret_cast<uintptr_t>(handle));
  return it == Registry().end() ? nullptr : it->second;
}

// Takes m for the caller with `recursions` levels, blocking as long as
// another thread owns it (raw_monitors.h .safepoints). INVALID_MONITOR if m is
// destroyed first.
vmtiError Acquire(RawMonitor& m, uint64_t self, int recursions) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(m.mu);
      if (m.destroyed) return VMTI_ERROR_INVALID_MONITOR;
      if (m.owner == 0) {
        m.owner = self;
        m.recursions = recursions;
        return VMTI_ERROR_NONE;
      }
    }
    SafepointSafeScope blocked;
    std::unique_lock<std::mutex> lock(m.mu);
    m.cv.wait(lock, [&m] { return m.owner == 0 || m.destroyed; });
    // Unlock before the region ends: leaving it may wait for a collection,
    // and the monitor is taken only afterwards, at the top of the loop.
  }
}

}  // namespace

vmtiError CreateRawMonitorImpl(const char* name, vmtiRawMonitorID* monitor_ptr) {
  if (name == nullptr || monitor_ptr == nullptr) return VMTI_ERROR_NULL_POINTER;
  auto monitor = std::make_shared<RawMonitor>(name);
  std::lock_guard<std::mutex> lock(g_registry_mu);
  const uintptr_t id = g_next_monitor++;
  Registry().emplace(id, std::move(monitor));
  *monitor_ptr = reinterpret_cast<vmtiRawMonitorID>(id);
  return VMTI_ERROR_NONE;
}

vmtiError DestroyRawMonitorImpl(vmtiRawMonitorID handle) {
  const uint64_t self = SelfId();
  std::lock_guard<std::mutex> registry_lock(g_registry_mu);
  auto it = Registry().find(reinterpret_cast<uintptr_t>(handle));
  if (it == Registry().end()) return VMTI_ERROR_INVALID_MONITOR;
  std::shared_ptr<RawMonitor> m = it->second;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (m->owner != 0 && m->owner != self) return VMTI_ERROR_NOT_MONITOR_OWNER;
    // Owned by the caller: released with the monitor (JVMTI). Threads
    // waiting to enter or to be notified wake with INVALID_MONITOR.
    m->owner = 0;
    m->recursions = 0;
    m->destroyed = true;
    m->cv.notify_all();
  }
  Registry().erase(it);
  return VMTI_ERROR_NONE;
}

vmtiError RawMonitorEnterImpl(vmtiRawMonitorID handle) {
  std::shared_ptr<RawMonitor> m = Lookup(handle);
  if (m == nullptr) return VMTI_ERROR_INVALID_MONITOR;
  const uint64_t self = SelfId();
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (m->owner == self) {
      ++m->recursions;
      return VMTI_ERROR_NONE;
    }
  }
  return Acquire(*m, self, 1);
}

vmtiError RawMonitorExitImpl(vmtiRawMonitorID handle) {
  std::shared_ptr<RawMonitor> m = Lookup(handle);
  if (m == nullptr) return VMTI_ERROR_INVALID_MONITOR;
  std::lock_guard<std::mutex> lock(m->mu);
  if (m->owner != SelfId()) return VMTI_ERROR_NOT_MONITOR_OWNER;
  if (--m->recursions == 0) {
    m->owner = 0;
    m->cv.notify_all();
  }
  return VMTI_ERROR_NONE;
}

vmtiError RawMonitorWaitImpl(vmtiRawMonitorID handle, vmtiLong millis) {
  std::shared_ptr<RawMonitor> m = Lookup(handle);
  if (m == nullptr) return VMTI_ERROR_INVALID_MONITOR;
  const uint64_t self = SelfId();
  RawMonitor::Waiter waiter;
  int saved_recursions;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (m->owner != self) return VMTI_ERROR_NOT_MONITOR_OWNER;
    if (InterruptedHere()) return VMTI_ERROR_INTERRUPT;  // still owned, as JVMTI returns
    saved_recursions = m->recursions;
    m->owner = 0;
    m->recursions = 0;
    m->wait_set.push_back(&waiter);
    m->cv.notify_all();  // threads waiting to enter
  }
  bool interrupted = false;
  {
    SafepointSafeScope blocked;
    std::unique_lock<std::mutex> lock(m->mu);
    auto done = [&] { return waiter.notified || m->destroyed || InterruptedHere(); };
    if (millis > 0) {
      // A deadline beyond any real wait (a year) instead of overflowing
      // steady_clock's range with a huge millis.
      constexpr vmtiLong kMaxMillis = vmtiLong{365} * 24 * 3600 * 1000;
      m->cv.wait_for(lock, std::chrono::milliseconds(std::min(millis, kMaxMillis)), done);
    } else {
      m->cv.wait(lock, done);
    }
    // Notified, timed out, interrupted or destroyed: leave the wait set in
    // every case (Notify only marks, never removes).
    m->wait_set.remove(&waiter);
    interrupted = !waiter.notified && InterruptedHere();
  }
  // Own the monitor again, with every level, before returning (also after
  // an interrupt, as JVMTI's RawMonitorWait does).
  if (vmtiError err = Acquire(*m, self, saved_recursions); err != VMTI_ERROR_NONE) return err;
  return interrupted ? VMTI_ERROR_INTERRUPT : VMTI_ERROR_NONE;
}

vmtiError RawMonitorNotifyImpl(vmtiRawMonitorID handle, bool all) {
  std::shared_ptr<RawMonitor> m = Lookup(handle);
  if (m == nullptr) return VMTI_ERROR_INVALID_MONITOR;
  std::lock_guard<std::mutex> lock(m->mu);
  if (m->owner != SelfId()) return VMTI_ERROR_NOT_MONITOR_OWNER;
  bool any = false;
  for (RawMonitor::Waiter* w : m->wait_set) {
    if (w->notified) continue;  // notified already, not yet out of the set
    w->notified = true;
    any = true;
    if (!all) break;
  }
  if (any) m->cv.notify_all();
  return VMTI_ERROR_NONE;
}

void InterruptAgentThreadWaits() {
  if (g_agent_waits_interrupted.exchange(true, std::memory_order_acq_rel)) return;
  std::vector<std::shared_ptr<RawMonitor>> monitors;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    for (const auto& [id, m] : Registry()) monitors.push_back(m);
  }
  // Under each monitor's lock, so that a waiter between its predicate check
  // and its wait cannot miss the broadcast.
  for (const auto& m : monitors) {
    std::lock_guard<std::mutex> lock(m->mu);
    m->cv.notify_all();
  }
}

}  // namespace minivm::agent
