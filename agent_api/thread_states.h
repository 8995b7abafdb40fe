// Safepoint states around agent code: the agent API's side of JVMTI's
// "in native" (the states themselves and their protocol are in
// gc/safepoint.h).
//
// Rules:
// .callbacks-native  Every callback that runs on a VM thread outside a pause runs in a
//    NativeScope: SampledObjectAlloc, ObjectPromote, ObjectFree, ThreadStart,
//    ThreadEnd, VMInit, VMDeath. A collection may then run while the callback
//    runs (waits on a lock, a raw monitor, I/O). GarbageCollectionStart and
//    GarbageCollectionFinish run inside the pause, on the thread that owns it:
//    no state change means anything there (nothing else runs), and only the
//    raw functions are allowed in them.
// .functions-vm  Every VMTI function that reads an object, an object handle's slot or a
//    weak slot, or that runs the collector, holds a VmScope for its whole
//    body: the thread is back in the VM (kRunning), waiting first for a
//    collection in progress, so no collection can run while it holds a raw
//    object address. An address taken inside a VmScope is never used after
//    the scope ends (agent_api/tags.h relies on this).
// .handles  Object handles (vmtiObject) name root slots (the heap's sample root),
//    which every collection visits and updates, native threads included: a
//    handle names the same object after a collection that ran during the
//    callback.
// .safepoint-safe  SafepointSafeScope is for waits the agent API does on the agent's behalf
//    (raw monitors): a VM thread in the VM becomes kBlocked for the wait. It
//    may be used from any thread and in any state.
// All three are no-ops on a thread that is not an attached VM thread (an
// agent's own pthread, the signal thread at VM death), and all of them
// restore the state they found, so they nest in any order.
#ifndef MINIVM_AGENT_API_THREAD_STATES_H_
#define MINIVM_AGENT_API_THREAD_STATES_H_

#include "gc/heap.h"
#include "gc/mutator.h"
#include "gc/safepoint.h"

namespace minivm::agent {

// Moves the calling thread, if it is an attached VM thread, to `to` for the
// scope's lifetime. The three public scopes below name the intent.
class SafepointStateScope {
 public:
  explicit SafepointStateScope(gc::SafepointState to);
  ~SafepointStateScope();
  SafepointStateScope(const SafepointStateScope&) = delete;
  SafepointStateScope& operator=(const SafepointStateScope&) = delete;

 private:
  gc::Mutator* m_ = nullptr;  // null: not a VM thread, nothing to restore
  gc::SafepointState saved_ = gc::SafepointState::kRunning;
};

// Around one agent callback (.callbacks-native).
class NativeScope : public SafepointStateScope {
 public:
  NativeScope() : SafepointStateScope(gc::SafepointState::kNative) {}
};

// Around a VMTI function that touches objects (.functions-vm). Entering may wait
// for a collection in progress.
class VmScope : public SafepointStateScope {
 public:
  VmScope() : SafepointStateScope(gc::SafepointState::kRunning) {}
};

// Around a VMTI function that reads objects through vmtiObject handles
// (.functions-vm), on any thread. On an attached VM thread it is a VmScope. Any
// other thread (an agent thread, an agent's pthread using the results of
// GetObjectsWithTags) is not a mutator, so no safepoint waits for it: it
// stops the world for the scope instead, unless it owns the safepoint
// already (a heap walk's callback). ok() is false when the world is stopped
// for good by another thread (VM death): the function must then return
// VMTI_ERROR_WRONG_PHASE without touching objects.
class ObjectAccessScope {
 public:
  explicit ObjectAccessScope(gc::Heap* heap);
  ~ObjectAccessScope();
  ObjectAccessScope(const ObjectAccessScope&) = delete;
  ObjectAccessScope& operator=(const ObjectAccessScope&) = delete;
  bool ok() const { return ok_; }

 private:
  VmScope in_vm_;               // a no-op on threads that are not attached
  gc::Heap* stopped_ = nullptr;  // the heap whose world this scope stopped
  bool ok_ = true;
};

// Around a wait that must not hold up a safepoint (.safepoint-safe): raw monitor
// enter and wait. The thread must not touch objects inside it.
class SafepointSafeScope : public SafepointStateScope {
 public:
  SafepointSafeScope() : SafepointStateScope(gc::SafepointState::kBlocked) {}
};

// True when the calling thread may hold raw object addresses: not an
// attached VM thread, or one in kRunning (checks .functions-vm in debug builds).
bool InVmState();

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_THREAD_STATES_H_
