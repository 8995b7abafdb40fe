// The VMTI functions. Each one validates, in this order: the environment
// (INVALID_ENVIRONMENT), the phase (WRONG_PHASE; also inside the restricted
// GarbageCollectionStart/Finish callbacks), the capability
// (MUST_POSSESS_CAPABILITY), then its arguments (NULL_POINTER,
// ILLEGAL_ARGUMENT, INVALID_*). No argument an agent can pass crashes the
// VM: handles are looked up, never trusted (docs/agent-api.md).
//
// Callbacks run in native state (agent_api/thread_states.h). A function that
// reads an object or a handle's slot opens VMTI_OBJECTS_STABLE right after
// VMTI_ENTER, one that runs the GC opens VMTI_IN_VM: its whole body runs in
// the VM state (or, on a thread that is not a mutator, with the world
// stopped), so no collection moves an object while it holds the object's
// address, and the address is dead when the function returns. Functions that read only
// VM-wide settings, the caller's own frames (no collector writes them),
// thread-local sample data, or a weak slot's nullness (under the weak
// table's lock) stay native, and work from agents' own threads.
#include "agent_api/functions.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "agent_api/environment.h"
#include "agent_api/heap_walk.h"
#include "agent_api/raw_monitors.h"
#include "agent_api/thread_states.h"
#include "agent_api/tool_interface.h"
#include "gc/heap.h"
#include "vm/runtime/thread.h"
#include "vm/runtime/vm.h"

namespace minivm::agent {
namespace {

// ---- Environment validation --------------------------------------------
// A forged or stale vmtiEnv* is rejected without being dereferenced: the
// pool checks it by address (environment.h, .pool).
Environment* LookupEnv(vmtiEnv* env) { return EnvironmentPool::Get().Find(env); }

constexpr unsigned kOnload = VMTI_PHASE_ONLOAD;
constexpr unsigned kLive = VMTI_PHASE_LIVE;
constexpr unsigned kDead = VMTI_PHASE_DEAD;
constexpr unsigned kAnyPhase = kOnload | kLive | kDead;

// Common entry checks. `restricted_ok`: allowed inside GC start/finish.
vmtiError Enter(vmtiEnv* env, unsigned phases, bool restricted_ok, Environment** out) {
  Environment* e = LookupEnv(env);
  if (e == nullptr || e->disposed.load(std::memory_order_acquire)) {
    return VMTI_ERROR_INVALID_ENVIRONMENT;
  }
  if ((static_cast<unsigned>(e->tool->phase()) & phases) == 0) return VMTI_ERROR_WRONG_PHASE;
  AgentThreadState& ts = CurrentAgentThreadState();
  if (!restricted_ok && ts.restricted_depth > 0) return VMTI_ERROR_WRONG_PHASE;
  AgeHeldBatches(ts);
  *out = e;
  return VMTI_ERROR_NONE;
}

// Inside a heap walk's callback the world is stopped by the calling thread:
// whatever needs a safepoint, allocates on the heap or collects would wait
// for itself (docs/agent-api.md, "Heap walking").
#define VMTI_NOT_IN_HEAP_CALLBACK()                        \
  if (CurrentAgentThreadState().heap_callback_depth > 0) { \
    return VMTI_ERROR_WRONG_PHASE;                         \
  }

#define VMTI_ENTER(env, phases, restricted_ok)                                           \
  Environment* e = nullptr;                                                              \
  if (vmtiError err_ = Enter(env, phases, restricted_ok, &e); err_ != VMTI_ERROR_NONE) { \
    return err_;                                                                         \
  }

// Back in the VM for the rest of the function (may wait for a collection).
#define VMTI_IN_VM() VmScope in_vm_

// Object addresses stay valid until the function returns (ObjectAccessScope).
#define VMTI_OBJECTS_STABLE()                               \
  ObjectAccessScope objects_stable_(e->tool->vm()->heap()); \
  if (!objects_stable_.ok()) return VMTI_ERROR_WRONG_PHASE

#define VMTI_NOT_NULL(p) \
  if ((p) == nullptr) return VMTI_ERROR_NULL_POINTER

// Copies a string into Allocate'd memory.
vmtiError CopyString(std::string_view s, char** out) {
  char* mem = static_cast<char*>(std::malloc(s.size() + 1));
  if (mem == nullptr) return VMTI_ERROR_OUT_OF_MEMORY;
  std::memcpy(mem, s.data(), s.size());
  mem[s.size()] = '\0';
  *out = mem;
  return VMTI_ERROR_NONE;
}

const Function* ResolveMethod(Environment* e, vmtiMethodID method) {
  const uintptr_t id = reinterpret_cast<uintptr_t>(method);
  const Program& program = e->tool->vm()->program();
  if (id == 0 || id > program.functions.size()) return nullptr;
  return program.functions[id - 1].get();
}

vmtiMethodID MethodId(const Function* fn) {
  return reinterpret_cast<vmtiMethodID>(static_cast<uintptr_t>(fn->index) + 1);
}

std::string_view ErrorName(vmtiError error) {
  switch (error) {
#define VMTI_ERROR_NAME_(name, value) \
  case VMTI_ERROR_##name:             \
    return "VMTI_ERROR_" #name;
    VMTI_ERRORS(VMTI_ERROR_NAME_)
#undef VMTI_ERROR_NAME_
    default:
      return {};
  }
}

vmtiCapabilities AllCapabilities() {
  vmtiCapabilities c;
  std::memset(&c, 0, sizeof c);
  c.can_generate_sampled_alloc_events = 1;
  c.can_tag_objects = 1;
  c.can_generate_object_free_events = 1;
  c.can_generate_object_promote_events = 1;
  c.can_generate_garbage_collection_events = 1;
  return c;
}

// ---- Version, phase, errors, memory ------------------------------------

vmtiError GetVersionNumber(vmtiEnv* env, vmtiInt* version_ptr) {
  VMTI_ENTER(env, kAnyPhase, true);
  VMTI_NOT_NULL(version_ptr);
  *version_ptr = VMTI_VERSION;
  return VMTI_ERROR_NONE;
}

vmtiError GetPhase(vmtiEnv* env, vmtiPhase* phase_ptr) {
  VMTI_ENTER(env, kAnyPhase, true);
  VMTI_NOT_NULL(phase_ptr);
  *phase_ptr = e->tool->phase();
  return VMTI_ERROR_NONE;
}

vmtiError GetErrorName(vmtiEnv* env, vmtiError error, char** name_ptr) {
  VMTI_ENTER(env, kAnyPhase, true);
  VMTI_NOT_NULL(name_ptr);
  const std::string_view name = ErrorName(error);
  if (name.empty()) {
    *name_ptr = nullptr;
    return VMTI_ERROR_ILLEGAL_ARGUMENT;
  }
  return CopyString(name, name_ptr);
}

vmtiError Allocate(vmtiEnv* env, vmtiLong size, unsigned char** mem_ptr) {
  VMTI_ENTER(env, kAnyPhase, true);
  VMTI_NOT_NULL(mem_ptr);
  if (size < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  if (size == 0) {
    *mem_ptr = nullptr;
    return VMTI_ERROR_NONE;
  }
  void* mem = std::malloc(static_cast<size_t>(size));
  if (mem == nullptr) return VMTI_ERROR_OUT_OF_MEMORY;
  *mem_ptr = static_cast<unsigned char*>(mem);
  return VMTI_ERROR_NONE;
}

vmtiError Deallocate(vmtiEnv* env, unsigned char* mem) {
  VMTI_ENTER(env, kAnyPhase, true);
  std::free(mem);
  return VMTI_ERROR_NONE;
}

// ---- Environments ------------------------------------------------------

vmtiError DisposeEnvironment(vmtiEnv* env) {
  VMTI_ENTER(env, kAnyPhase, false);
  VMTI_NOT_IN_HEAP_CALLBACK();
  e->tool->DisposeEnvironment(e);
  return VMTI_ERROR_NONE;
}

vmtiError SetEnvironmentLocalStorage(vmtiEnv* env, const void* data) {
  VMTI_ENTER(env, kAnyPhase, true);
  e->local_storage.store(data);
  return VMTI_ERROR_NONE;
}

vmtiError GetEnvironmentLocalStorage(vmtiEnv* env, void** data_ptr) {
  VMTI_ENTER(env, kAnyPhase, true);
  VMTI_NOT_NULL(data_ptr);
  *data_ptr = const_cast<void*>(e->local_storage.load());
  return VMTI_ERROR_NONE;
}

// ---- Capabilities ------------------------------------------------------

vmtiError GetPotentialCapabilities(vmtiEnv* env, vmtiCapabilities* caps_ptr) {
  VMTI_ENTER(env, kOnload | kLive, false);
  VMTI_NOT_NULL(caps_ptr);
  *caps_ptr = AllCapabilities();
  return VMTI_ERROR_NONE;
}

vmtiError AddCapabilities(vmtiEnv* env, const vmtiCapabilities* caps_ptr) {
  VMTI_ENTER(env, kOnload | kLive, false);
  VMTI_NOT_NULL(caps_ptr);
  // Every named capability is potentially available, to every environment
  // at once; bits minivm does not know (the reserved words) are not.
  if ((caps_ptr->reserved[0] | caps_ptr->reserved[1] | caps_ptr->reserved[2]) != 0) {
    return VMTI_ERROR_NOT_AVAILABLE;
  }
  base::MutexLock lock(&e->mu);
  vmtiCapabilities& have = e->capabilities;
  have.can_generate_sampled_alloc_events |= caps_ptr->can_generate_sampled_alloc_events;
  have.can_tag_objects |= caps_ptr->can_tag_objects;
  have.can_generate_object_free_events |= caps_ptr->can_generate_object_free_events;
  have.can_generate_object_promote_events |= caps_ptr->can_generate_object_promote_events;
  have.can_generate_garbage_collection_events |= caps_ptr->can_generate_garbage_collection_events;
  e->CapabilitiesChangedLocked();
  return VMTI_ERROR_NONE;
}

vmtiError RelinquishCapabilities(vmtiEnv* env, const vmtiCapabilities* caps_ptr) {
  VMTI_ENTER(env, kOnload | kLive, false);
  VMTI_NOT_IN_HEAP_CALLBACK();
  VMTI_NOT_NULL(caps_ptr);
  {
    base::MutexLock lock(&e->mu);
    vmtiCapabilities& have = e->capabilities;
    if (caps_ptr->can_generate_sampled_alloc_events) have.can_generate_sampled_alloc_events = 0;
    if (caps_ptr->can_tag_objects) have.can_tag_objects = 0;
    if (caps_ptr->can_generate_object_free_events) have.can_generate_object_free_events = 0;
    if (caps_ptr->can_generate_object_promote_events) have.can_generate_object_promote_events = 0;
    if (caps_ptr->can_generate_garbage_collection_events) {
      have.can_generate_garbage_collection_events = 0;
    }
    e->CapabilitiesChangedLocked();
  }
  // Losing the sampling capability stops this env's sampling.
  e->tool->ReconfigureSampling();
  return VMTI_ERROR_NONE;
}

vmtiError GetCapabilities(vmtiEnv* env, vmtiCapabilities* caps_ptr) {
  VMTI_ENTER(env, kAnyPhase, false);
  VMTI_NOT_NULL(caps_ptr);
  *caps_ptr = e->Capabilities();
  return VMTI_ERROR_NONE;
}

// ---- Events ------------------------------------------------------------

vmtiError SetEventCallbacks(vmtiEnv* env, const vmtiEventCallbacks* callbacks,
                            vmtiInt size_of_callbacks) {
  VMTI_ENTER(env, kOnload | kLive, false);
  if (size_of_callbacks < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  vmtiEventCallbacks copy;
  std::memset(&copy, 0, sizeof copy);
  // An older, shorter struct fills a prefix; a longer one (a newer header)
  // contributes only the callbacks this VM knows.
  if (callbacks != nullptr) {
    std::memcpy(&copy, callbacks,
                std::min<size_t>(sizeof copy, static_cast<size_t>(size_of_callbacks)));
  }
  base::MutexLock lock(&e->mu);
  e->callbacks = copy;
  return VMTI_ERROR_NONE;
}

vmtiError SetEventNotificationMode(vmtiEnv* env, vmtiEventMode mode, vmtiEvent event_type,
                                   vmtiThread event_thread) {
  VMTI_ENTER(env, kOnload | kLive, false);
  VMTI_NOT_IN_HEAP_CALLBACK();
  if (mode != VMTI_ENABLE && mode != VMTI_DISABLE) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  if (!IsKnownEvent(event_type)) return VMTI_ERROR_INVALID_EVENT_TYPE;
  if (!HasCapabilityFor(e->Capabilities(), event_type)) {
    return VMTI_ERROR_MUST_POSSESS_CAPABILITY;
  }
  const uint64_t bit = EventBit(event_type);
  if (event_thread == nullptr) {
    if (mode == VMTI_ENABLE) {
      e->global_events.fetch_or(bit);
    } else {
      e->global_events.fetch_and(~bit);
    }
  } else {
    // VM-wide events cannot be controlled per thread (as in JVMTI).
    if (event_type == VMTI_EVENT_VM_INIT || event_type == VMTI_EVENT_VM_DEATH ||
        event_type == VMTI_EVENT_GARBAGE_COLLECTION_START ||
        event_type == VMTI_EVENT_GARBAGE_COLLECTION_FINISH ||
        event_type == VMTI_EVENT_OBJECT_FREE || event_type == VMTI_EVENT_OBJECT_PROMOTE) {
      return VMTI_ERROR_ILLEGAL_ARGUMENT;
    }
    if (e->tool->phase() != VMTI_PHASE_LIVE) return VMTI_ERROR_WRONG_PHASE;
    VMThread* t = nullptr;
    if (vmtiError err = e->tool->ResolveThread(event_thread, &t); err != VMTI_ERROR_NONE) {
      return err;
    }
    base::MutexLock lock(&e->mu);
    uint64_t& mask = e->thread_events[t];
    mask = mode == VMTI_ENABLE ? (mask | bit) : (mask & ~bit);
    e->ThreadEventsChangedLocked();
  }
  if (event_type == VMTI_EVENT_SAMPLED_OBJECT_ALLOC) e->tool->ReconfigureSampling();
  return VMTI_ERROR_NONE;
}

vmtiError SetHeapSamplingInterval(vmtiEnv* env, vmtiInt sampling_interval) {
  VMTI_ENTER(env, kOnload | kLive, false);
  VMTI_NOT_IN_HEAP_CALLBACK();
  if (!e->Capabilities().can_generate_sampled_alloc_events) {
    return VMTI_ERROR_MUST_POSSESS_CAPABILITY;
  }
  if (sampling_interval < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  e->interval.store(sampling_interval, std::memory_order_relaxed);
  e->tool->ReconfigureSampling();
  return VMTI_ERROR_NONE;
}

// JEP 331's name for the same function (SetHeapSamplingRate in the JEP's
// text, SetHeapSamplingInterval in the JVMTI that shipped).
vmtiError SetHeapSamplingRate(vmtiEnv* env, vmtiInt bytes) {
  return SetHeapSamplingInterval(env, bytes);
}

vmtiError GetHeapSamplingInterval(vmtiEnv* env, vmtiInt* interval_ptr) {
  VMTI_ENTER(env, kOnload | kLive, false);
  VMTI_NOT_NULL(interval_ptr);
  *interval_ptr = e->interval.load(std::memory_order_relaxed);
  return VMTI_ERROR_NONE;
}

// ---- Threads and stacks ------------------------------------------------

vmtiError GetCurrentThread(vmtiEnv* env, vmtiThread* thread_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_NULL(thread_ptr);
  VMThread* t = CurrentAgentThreadState().thread;
  if (t == nullptr) return VMTI_ERROR_INVALID_THREAD;
  *thread_ptr = reinterpret_cast<vmtiThread>(t);
  return VMTI_ERROR_NONE;
}

vmtiError GetThreadInfo(vmtiEnv* env, vmtiThread thread, vmtiThreadInfo* info_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_NULL(info_ptr);
  VMThread* t = CurrentAgentThreadState().thread;
  if (thread != nullptr) {
    bool alive = false;
    t = e->tool->vm()->FindThread(thread, &alive);  // a finished thread still has a name
  }
  if (t == nullptr) return VMTI_ERROR_INVALID_THREAD;
  char* name = nullptr;
  if (vmtiError err = CopyString(t->name, &name); err != VMTI_ERROR_NONE) return err;
  info_ptr->name = name;
  info_ptr->id = t->index;
  return VMTI_ERROR_NONE;
}

vmtiError GetAllThreads(vmtiEnv* env, vmtiInt* threads_count_ptr, vmtiThread** threads_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_NULL(threads_count_ptr);
  VMTI_NOT_NULL(threads_ptr);
  const std::vector<VMThread*> live = e->tool->vm()->LiveThreads();
  auto* out =
      static_cast<vmtiThread*>(std::malloc(sizeof(vmtiThread) * std::max<size_t>(1, live.size())));
  if (out == nullptr) return VMTI_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < live.size(); ++i) out[i] = reinterpret_cast<vmtiThread>(live[i]);
  *threads_count_ptr = static_cast<vmtiInt>(live.size());
  *threads_ptr = out;
  return VMTI_ERROR_NONE;
}

// Copies up to max_frame_count frames of `t`, from start_depth (JVMTI's
// rule: >= 0 counts from the innermost frame, < 0 from the outermost), into
// frame_buffer. `t` must be the calling thread or stopped at a safepoint.
vmtiError ReadFrames(const VMThread* t, vmtiInt start_depth, vmtiInt max_frame_count,
                     vmtiFrameInfo* frame_buffer, vmtiInt* count_ptr) {
  const int depth = t->depth();
  int first;  // index from the innermost frame
  if (start_depth >= 0) {
    if (start_depth > depth || (start_depth == depth && depth > 0)) {
      return VMTI_ERROR_ILLEGAL_ARGUMENT;
    }
    first = start_depth;
  } else {
    if (-static_cast<int64_t>(start_depth) > depth) return VMTI_ERROR_ILLEGAL_ARGUMENT;
    first = depth + start_depth;
  }
  int count = 0;
  for (int i = first; i < depth && count < max_frame_count; ++i, ++count) {
    const Frame& f = t->fp[-i];
    frame_buffer[count].method = MethodId(f.fn);
    frame_buffer[count].location = static_cast<vmtiLocation>(f.pc() - f.fn->code.data());
  }
  *count_ptr = count;
  return VMTI_ERROR_NONE;
}

// Runs fn(thread) for each VM thread that is attached to the heap (alive and
// running language code, or blocked), with every one of them stopped where
// its frames are precise: the calling thread as it is, the others at a
// safepoint (the interpreter and compiled code write the frame's pc back
// before every poll and blocking call, so a stopped thread's frames are what
// it would report itself). fn must not allocate on the VM heap or block.
void ForEachStoppedThread(Environment* e, absl::FunctionRef<void(VMThread*)> fn) {
  e->tool->vm()->heap()->RunAtSafepoint(RequesterMutator(),
                                        [&](gc::Mutator* m) { fn(VMThread::FromMutator(m)); });
}

// `t`'s frames read with t stopped; THREAD_NOT_ALIVE if it finished (or
// detached) before the safepoint.
template <typename F>
vmtiError WithThreadStopped(Environment* e, VMThread* t, F&& read) {
  // An agent thread's frames are always none: nothing to stop it for (and
  // it is no mutator, so no safepoint would find it).
  if (t == CurrentAgentThreadState().thread || t->agent_thread) return read(t);
  vmtiError result = VMTI_ERROR_THREAD_NOT_ALIVE;
  ForEachStoppedThread(e, [&](VMThread* stopped) {
    if (stopped == t) result = read(t);
  });
  return result;
}

vmtiError GetStackTrace(vmtiEnv* env, vmtiThread thread, vmtiInt start_depth,
                        vmtiInt max_frame_count, vmtiFrameInfo* frame_buffer, vmtiInt* count_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_IN_HEAP_CALLBACK();
  VMTI_NOT_NULL(frame_buffer);
  VMTI_NOT_NULL(count_ptr);
  if (max_frame_count < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  VMThread* t = nullptr;
  if (vmtiError err = e->tool->ResolveThread(thread, &t); err != VMTI_ERROR_NONE) return err;
  return WithThreadStopped(e, t, [&](VMThread* stopped) {
    return ReadFrames(stopped, start_depth, max_frame_count, frame_buffer, count_ptr);
  });
}

vmtiError GetFrameCount(vmtiEnv* env, vmtiThread thread, vmtiInt* count_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_IN_HEAP_CALLBACK();
  VMTI_NOT_NULL(count_ptr);
  VMThread* t = nullptr;
  if (vmtiError err = e->tool->ResolveThread(thread, &t); err != VMTI_ERROR_NONE) return err;
  return WithThreadStopped(e, t, [&](VMThread* stopped) {
    *count_ptr = stopped->depth();
    return VMTI_ERROR_NONE;
  });
}

// One block for the whole result, freed with one Deallocate: the
// vmtiStackInfo array, then every thread's frames.
vmtiError PackStacks(const std::vector<VMThread*>& threads,
                     const std::vector<std::vector<vmtiFrameInfo>>& frames, vmtiStackInfo** out) {
  size_t total = 0;
  for (const auto& f : frames) total += f.size();
  const size_t bytes =
      sizeof(vmtiStackInfo) * std::max<size_t>(1, threads.size()) + sizeof(vmtiFrameInfo) * total;
  auto* block = static_cast<unsigned char*>(std::malloc(bytes));
  if (block == nullptr) return VMTI_ERROR_OUT_OF_MEMORY;
  auto* info = reinterpret_cast<vmtiStackInfo*>(block);
  auto* next = reinterpret_cast<vmtiFrameInfo*>(block + sizeof(vmtiStackInfo) *
                                                            std::max<size_t>(1, threads.size()));
  for (size_t i = 0; i < threads.size(); ++i) {
    info[i].thread = reinterpret_cast<vmtiThread>(threads[i]);
    info[i].state = 0;
    info[i].frame_buffer = next;
    info[i].frame_count = static_cast<vmtiInt>(frames[i].size());
    std::copy(frames[i].begin(), frames[i].end(), next);
    next += frames[i].size();
  }
  *out = info;
  return VMTI_ERROR_NONE;
}

std::vector<vmtiFrameInfo> FramesOf(const VMThread* t, vmtiInt max_frame_count) {
  std::vector<vmtiFrameInfo> frames(static_cast<size_t>(std::min(t->depth(), max_frame_count)));
  vmtiInt n = 0;
  ReadFrames(t, 0, max_frame_count, frames.data(), &n);
  frames.resize(static_cast<size_t>(n));
  return frames;
}

vmtiError GetAllStackTraces(vmtiEnv* env, vmtiInt max_frame_count, vmtiStackInfo** stack_info_ptr,
                            vmtiInt* thread_count_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_IN_HEAP_CALLBACK();
  VMTI_NOT_NULL(stack_info_ptr);
  VMTI_NOT_NULL(thread_count_ptr);
  if (max_frame_count < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  std::vector<VMThread*> threads;
  std::vector<std::vector<vmtiFrameInfo>> frames;
  // One safepoint: a consistent snapshot of every attached thread, the
  // caller's own stack included.
  ForEachStoppedThread(e, [&](VMThread* t) {
    threads.push_back(t);
    frames.push_back(FramesOf(t, max_frame_count));
  });
  // Spawn order, main first, as GetAllThreads lists them.
  std::vector<size_t> order(threads.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return threads[a]->index < threads[b]->index; });
  std::vector<VMThread*> sorted_threads;
  std::vector<std::vector<vmtiFrameInfo>> sorted_frames;
  for (size_t i : order) {
    sorted_threads.push_back(threads[i]);
    sorted_frames.push_back(std::move(frames[i]));
  }
  if (vmtiError err = PackStacks(sorted_threads, sorted_frames, stack_info_ptr);
      err != VMTI_ERROR_NONE) {
    return err;
  }
  *thread_count_ptr = static_cast<vmtiInt>(sorted_threads.size());
  return VMTI_ERROR_NONE;
}

vmtiError GetThreadListStackTraces(vmtiEnv* env, vmtiInt thread_count,
                                   const vmtiThread* thread_list, vmtiInt max_frame_count,
                                   vmtiStackInfo** stack_info_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_IN_HEAP_CALLBACK();
  VMTI_NOT_NULL(thread_list);
  VMTI_NOT_NULL(stack_info_ptr);
  if (thread_count < 0 || max_frame_count < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  std::vector<VMThread*> threads(static_cast<size_t>(thread_count));
  for (vmtiInt i = 0; i < thread_count; ++i) {
    bool alive = false;
    threads[i] = e->tool->vm()->FindThread(thread_list[i], &alive);
    if (threads[i] == nullptr) return VMTI_ERROR_INVALID_THREAD;
  }
  // As JVMTI: a thread that has finished (or not started) has no frames.
  std::vector<std::vector<vmtiFrameInfo>> frames(threads.size());
  ForEachStoppedThread(e, [&](VMThread* t) {
    for (size_t i = 0; i < threads.size(); ++i) {
      if (threads[i] == t) frames[i] = FramesOf(t, max_frame_count);
    }
  });
  return PackStacks(threads, frames, stack_info_ptr);
}

vmtiError GetThreadParent(vmtiEnv* env, vmtiThread thread, vmtiThread* parent_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_NULL(parent_ptr);
  VMThread* t = CurrentAgentThreadState().thread;
  if (thread != nullptr) {
    bool alive = false;
    t = e->tool->vm()->FindThread(thread, &alive);  // finished threads too
  }
  if (t == nullptr) return VMTI_ERROR_INVALID_THREAD;
  *parent_ptr = reinterpret_cast<vmtiThread>(t->parent);
  return VMTI_ERROR_NONE;
}

vmtiError GetMethodName(vmtiEnv* env, vmtiMethodID method, char** name_ptr, char** signature_ptr,
                        char** generic_ptr) {
  VMTI_ENTER(env, kLive, false);
  const Function* fn = ResolveMethod(e, method);
  if (fn == nullptr) return VMTI_ERROR_INVALID_METHODID;
  if (name_ptr != nullptr) {
    if (vmtiError err = CopyString(fn->name, name_ptr); err != VMTI_ERROR_NONE) return err;
  }
  if (signature_ptr != nullptr) {
    if (vmtiError err = CopyString(absl::StrCat("(", fn->arity, ")"), signature_ptr);
        err != VMTI_ERROR_NONE) {
      return err;
    }
  }
  if (generic_ptr != nullptr) *generic_ptr = nullptr;
  return VMTI_ERROR_NONE;
}

vmtiError GetLineNumber(vmtiEnv* env, vmtiMethodID method, vmtiLocation location,
                        vmtiInt* line_ptr) {
  VMTI_ENTER(env, kLive, false);
  const Function* fn = ResolveMethod(e, method);
  if (fn == nullptr) return VMTI_ERROR_INVALID_METHODID;
  VMTI_NOT_NULL(line_ptr);
  if (location < 0 || static_cast<uint64_t>(location) >= fn->code.size()) {
    return VMTI_ERROR_INVALID_LOCATION;
  }
  *line_ptr = fn->lines.LineFor(static_cast<uint32_t>(location));
  return VMTI_ERROR_NONE;
}

vmtiError GetMethodSourceFile(vmtiEnv* env, vmtiMethodID method, char** source_name_ptr) {
  VMTI_ENTER(env, kLive, false);
  if (ResolveMethod(e, method) == nullptr) return VMTI_ERROR_INVALID_METHODID;
  VMTI_NOT_NULL(source_name_ptr);
  return CopyString(e->tool->vm()->program().path, source_name_ptr);
}

// ---- Objects and classes -----------------------------------------------

#define VMTI_RESOLVE_OBJECT(handle, var)            \
  gc::Object* var = e->tool->ResolveObject(handle); \
  if (var == nullptr) return VMTI_ERROR_INVALID_OBJECT

// The entry of a function on one object, live phase only: objects stay
// where they are until it returns, `allowed` (the capability the function
// needs) is checked before the object, and `var` is the object `handle`
// names.
#define VMTI_ENTER_OBJECT_IF(env, handle, var, allowed)      \
  VMTI_ENTER(env, kLive, false);                             \
  VMTI_OBJECTS_STABLE();                                     \
  if (!(allowed)) return VMTI_ERROR_MUST_POSSESS_CAPABILITY; \
  VMTI_RESOLVE_OBJECT(handle, var)

#define VMTI_ENTER_OBJECT(env, handle, var) VMTI_ENTER_OBJECT_IF(env, handle, var, true)

vmtiError GetObjectClass(vmtiEnv* env, vmtiObject object, vmtiClass* klass_ptr) {
  VMTI_ENTER_OBJECT(env, object, obj);
  VMTI_NOT_NULL(klass_ptr);
  *klass_ptr = reinterpret_cast<vmtiClass>(const_cast<gc::ClassLayout*>(obj->klass));
  return VMTI_ERROR_NONE;
}

vmtiError GetClassSignature(vmtiEnv* env, vmtiClass klass, char** signature_ptr,
                            char** generic_ptr) {
  VMTI_ENTER(env, kLive, false);
  const Klass* k = e->tool->vm()->FindClass(klass);
  if (k == nullptr) return VMTI_ERROR_INVALID_CLASS;
  if (signature_ptr != nullptr) {
    if (vmtiError err = CopyString(k->name, signature_ptr); err != VMTI_ERROR_NONE) return err;
  }
  if (generic_ptr != nullptr) *generic_ptr = nullptr;
  return VMTI_ERROR_NONE;
}

vmtiError GetObjectSize(vmtiEnv* env, vmtiObject object, vmtiLong* size_ptr) {
  VMTI_ENTER_OBJECT(env, object, obj);
  VMTI_NOT_NULL(size_ptr);
  *size_ptr = static_cast<vmtiLong>(obj->Size());
  return VMTI_ERROR_NONE;
}

vmtiError GetTag(vmtiEnv* env, vmtiObject object, vmtiLong* tag_ptr) {
  VMTI_ENTER_OBJECT_IF(env, object, obj, e->Capabilities().can_tag_objects);
  VMTI_NOT_NULL(tag_ptr);
  *tag_ptr = e->tags.Get(*e->tool->vm()->heap(), obj);
  return VMTI_ERROR_NONE;
}

vmtiError SetTag(vmtiEnv* env, vmtiObject object, vmtiLong tag) {
  VMTI_ENTER_OBJECT_IF(env, object, obj, e->Capabilities().can_tag_objects);
  e->tags.Set(*e->tool->vm()->heap(), e->id, obj, tag);
  return VMTI_ERROR_NONE;
}

vmtiError NewWeakRef(vmtiEnv* env, vmtiObject object, vmtiWeak* weak_ptr) {
  VMTI_ENTER_OBJECT(env, object, obj);
  VMTI_NOT_NULL(weak_ptr);
  *weak_ptr = e->tool->NewWeakRef(obj);
  return VMTI_ERROR_NONE;
}

vmtiError IsWeakRefCleared(vmtiEnv* env, vmtiWeak weak, vmtiBool* cleared_ptr) {
  VMTI_ENTER(env, kLive, false);
  const std::optional<bool> cleared = e->tool->IsWeakRefCleared(weak);
  if (!cleared) return VMTI_ERROR_INVALID_OBJECT;
  VMTI_NOT_NULL(cleared_ptr);
  *cleared_ptr = *cleared ? 1 : 0;
  return VMTI_ERROR_NONE;
}

vmtiError DeleteWeakRef(vmtiEnv* env, vmtiWeak weak) {
  VMTI_ENTER(env, kLive | kDead, false);
  if (!e->tool->DeleteWeakRef(weak)) return VMTI_ERROR_INVALID_OBJECT;
  return VMTI_ERROR_NONE;
}

vmtiError GetObjectGeneration(vmtiEnv* env, vmtiObject object, vmtiGeneration* generation_ptr) {
  VMTI_ENTER_OBJECT(env, object, obj);
  VMTI_NOT_NULL(generation_ptr);
  *generation_ptr =
      e->tool->vm()->heap()->IsYoung(obj) ? VMTI_GENERATION_YOUNG : VMTI_GENERATION_OLD;
  return VMTI_ERROR_NONE;
}

vmtiError GetSampleInfo(vmtiEnv* env, vmtiSampleInfo* info_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_NULL(info_ptr);
  const AgentThreadState& ts = CurrentAgentThreadState();
  if (ts.sample == nullptr) return VMTI_ERROR_NOT_AVAILABLE;
  info_ptr->sample_count = static_cast<vmtiLong>(ts.sample->sample_count);
  info_ptr->interval = ts.sample->interval;
  info_ptr->generation =
      ts.sample_generation == gc::Generation::kYoung ? VMTI_GENERATION_YOUNG : VMTI_GENERATION_OLD;
  info_ptr->weight = ts.sample->weight;
  return VMTI_ERROR_NONE;
}

vmtiError ForceGarbageCollection(vmtiEnv* env) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_IN_HEAP_CALLBACK();
  VMTI_IN_VM();
  if (!e->tool->ForceGarbageCollection()) return VMTI_ERROR_WRONG_PHASE;
  return VMTI_ERROR_NONE;
}

vmtiError GetTime(vmtiEnv* env, vmtiLong* nanos_ptr) {
  VMTI_ENTER(env, kAnyPhase, true);
  VMTI_NOT_NULL(nanos_ptr);
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  *nanos_ptr = static_cast<vmtiLong>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  return VMTI_ERROR_NONE;
}

// ---- Agent threads and raw monitors (agent_threads.cc, raw_monitors.h) ----

vmtiError RunAgentThread(vmtiEnv* env, const char* name, vmtiStartFunction proc, const void* arg,
                         vmtiThread* thread_ptr) {
  VMTI_ENTER(env, kLive, false);
  VMTI_NOT_NULL(name);
  VMTI_NOT_NULL(proc);
  return e->tool->RunAgentThread(e, name, proc, arg, thread_ptr);
}

// Raw monitors work in every phase and inside GarbageCollectionStart/Finish
// (restricted_ok), as in JVMTI; only creating one needs ONLOAD or LIVE.
vmtiError CreateRawMonitor(vmtiEnv* env, const char* name, vmtiRawMonitorID* monitor_ptr) {
  VMTI_ENTER(env, kOnload | kLive, true);
  return CreateRawMonitorImpl(name, monitor_ptr);
}

vmtiError DestroyRawMonitor(vmtiEnv* env, vmtiRawMonitorID monitor) {
  VMTI_ENTER(env, kAnyPhase, true);
  return DestroyRawMonitorImpl(monitor);
}

vmtiError RawMonitorEnter(vmtiEnv* env, vmtiRawMonitorID monitor) {
  VMTI_ENTER(env, kAnyPhase, true);
  return RawMonitorEnterImpl(monitor);
}

vmtiError RawMonitorExit(vmtiEnv* env, vmtiRawMonitorID monitor) {
  VMTI_ENTER(env, kAnyPhase, true);
  return RawMonitorExitImpl(monitor);
}

vmtiError RawMonitorWait(vmtiEnv* env, vmtiRawMonitorID monitor, vmtiLong millis) {
  VMTI_ENTER(env, kAnyPhase, true);
  return RawMonitorWaitImpl(monitor, millis);
}

vmtiError RawMonitorNotify(vmtiEnv* env, vmtiRawMonitorID monitor) {
  VMTI_ENTER(env, kAnyPhase, true);
  return RawMonitorNotifyImpl(monitor, /*all=*/false);
}

vmtiError RawMonitorNotifyAll(vmtiEnv* env, vmtiRawMonitorID monitor) {
  VMTI_ENTER(env, kAnyPhase, true);
  return RawMonitorNotifyImpl(monitor, /*all=*/true);
}

constexpr vmtiInterface_1 kTable = {
    &GetVersionNumber,
    &GetPhase,
    &GetErrorName,
    &Allocate,
    &Deallocate,
    &DisposeEnvironment,
    &SetEnvironmentLocalStorage,
    &GetEnvironmentLocalStorage,
    &GetPotentialCapabilities,
    &AddCapabilities,
    &RelinquishCapabilities,
    &GetCapabilities,
    &SetEventCallbacks,
    &SetEventNotificationMode,
    &SetHeapSamplingInterval,
    &GetHeapSamplingInterval,
    &GetCurrentThread,
    &GetThreadInfo,
    &GetAllThreads,
    &GetStackTrace,
    &GetMethodName,
    &GetLineNumber,
    &GetMethodSourceFile,
    &GetObjectClass,
    &GetClassSignature,
    &GetObjectSize,
    &GetTag,
    &SetTag,
    &NewWeakRef,
    &IsWeakRefCleared,
    &DeleteWeakRef,
    &GetObjectGeneration,
    &GetSampleInfo,
    &ForceGarbageCollection,
    &GetTime,
    &SetHeapSamplingRate,
    &GetThreadParent,
    &GetFrameCount,
    &GetAllStackTraces,
    &GetThreadListStackTraces,
    &RunAgentThread,
    &CreateRawMonitor,
    &DestroyRawMonitor,
    &RawMonitorEnter,
    &RawMonitorExit,
    &RawMonitorWait,
    &RawMonitorNotify,
    &RawMonitorNotifyAll,
    // Heap walking (heap_walk.cc).
    &FollowReferences,
    &IterateThroughHeap,
    &GetObjectsWithTags,
    &GetFieldName,
    &GetGlobalName,
    &GetLocalName,
};
// Slots are ABI and the table only grows at its end: a function added to
// vmti.h must be added here, last, and this count with it.
constexpr size_t kSlots = 54;
static_assert(sizeof(vmtiInterface_1) == kSlots * sizeof(void*), "vmti.h and kTable disagree");

}  // namespace

const vmtiInterface_1& FunctionTable() { return kTable; }

vmtiError EnterFunction(vmtiEnv* env, unsigned phases, bool restricted_ok, Environment** out) {
  return Enter(env, phases, restricted_ok, out);
}
vmtiError CopyApiString(std::string_view s, char** out) { return CopyString(s, out); }
const Function* ResolveMethodId(Environment* e, vmtiMethodID method) {
  return ResolveMethod(e, method);
}
vmtiMethodID MethodIdOf(const Function* fn) { return MethodId(fn); }

}  // namespace minivm::agent
