// The managed heap's interface to the VM: creation and options, thread
// attachment, collections, safepoints, heap walks, and the observers through
// which the heap reports samples, weak slots and collections. It has one
// implementation, GenerationalHeap (gc/generational_heap.h).
//
// The two inline paths the VM runs on every allocation and every reference
// store live beside it, each in its own header: gc/allocation.h (the TLAB
// fast path and the declaration of its one slow path, AllocateSlowPath) and
// gc/write_barrier.h (the card mark). See docs/gc.md, and
// docs/architecture.md for one allocation followed from the bytecode to the
// agent's callback.
#ifndef MINIVM_GC_HEAP_H_
#define MINIVM_GC_HEAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "gc/gc_observer.h"
#include "gc/heap_walker.h"
#include "gc/mutator.h"
#include "gc/safepoint.h"
#include "gc/object.h"
#include "gc/vm_interface.h"
#include "gc/weak_table.h"

namespace minivm::gc {

// Limits Heap::Create enforces (docs/gc.md, "Tuning").
inline constexpr size_t kMinHeapBytes = size_t{1} << 20;
inline constexpr size_t kMinYoungBytes = size_t{256} << 10;
inline constexpr size_t kMinOldBytes = size_t{512} << 10;

struct HeapOptions {
  size_t max_heap_bytes = size_t{1} << 30;  // --heap
  size_t young_bytes = 0;                   // --young; 0 = a third of the heap
  bool verbose_gc = false;                    // --verbose:gc, one line per GC on gc_log
  FILE* gc_log = stderr;
  bool verify_heap = false;       // --verify-heap: verify before and after each GC
  uint64_t gc_stress_every = 0;   // --gc-stress=N: collect at every N-th slow path
  // Upper bound of the adaptive tenuring threshold (HotSpot's
  // MaxTenuringThreshold): an object that survived this many minor
  // collections is promoted at the next. 0 promotes at the first collection.
  uint32_t max_tenuring_threshold = 15;
  // The heap sampler's streams derive from this and each thread's index
  // (--seed).
  uint64_t sampler_seed = 0;
  // Fixed TLAB size (--tlab-size); 0 = adaptive sizing.
  size_t fixed_tlab_bytes = 0;
};

enum class GcCause {
  kAllocationFailure,  // eden or the old generation could not satisfy a request
  kExplicit,           // gc() or ForceGarbageCollection
  kStress,             // --gc-stress
  kOldTarget,          // the old generation passed its occupancy target (collection.cc .occupancy)
};

struct HeapStats {
  // Bytes of objects allocated: used bytes of every retired TLAB plus every
  // outside-TLAB and large object (a thread's current TLAB counts once it is
  // retired, at its next refill or collection).
  uint64_t bytes_allocated = 0;
  uint64_t minor_collections = 0;
  uint64_t full_collections = 0;
  uint64_t total_pause_ns = 0;  // sum of all pauses: GC time share = this / wall time
  uint64_t max_pause_ns = 0;
  uint64_t bytes_promoted = 0;          // copied into the old generation, all time
  uint64_t large_objects_allocated = 0;
  uint64_t heap_used_bytes = 0;  // young + old bytes in use after the last collection
  uint64_t heap_capacity_bytes = 0;
  uint32_t tenuring_threshold = 0;
};

// One space's occupancy, for `minivm-attach PID heap` (docs/attach.md).
struct SpaceUsage {
  const char* name;  // "eden", "survivor", "old" (old includes large objects)
  uint64_t used_bytes;
  uint64_t capacity_bytes;
};

class Heap {
 public:
  virtual ~Heap() = default;

  // Reserves the whole heap up front (one contiguous mapping, so one card
  // table covers every space). Fails with a message for impossible sizes.
  static absl::StatusOr<std::unique_ptr<Heap>> Create(const HeapOptions& options,
                                                      VmInterface* vm);

  // Registers a thread with the heap. Its TLAB starts empty (all zeros).
  // Waits while a safepoint is in progress, so call it on the thread that
  // will run m (or from inside a BlockedScope), before it touches the heap;
  // until then its roots must be reachable some other way (e.g. globals).
  virtual void AttachMutator(Mutator* m) = 0;
  // Retires the thread's TLAB and forgets the thread. Call it on m's thread;
  // it parks like a poll if a safepoint is in progress. The thread must not
  // touch heap objects afterwards.
  virtual void DetachMutator(Mutator* m) = 0;

  // A full collection requested by the program or an agent. False when
  // none ran: the world is stopped for good (VM death) by another thread.
  virtual bool CollectGarbage(Mutator* requester, GcCause cause) = 0;

  // Called by a thread whose poll word is set; returns when the safepoint or
  // handshake that set it is over.
  virtual void SafepointPoll(Mutator* m) = 0;

  // Moves the calling thread's mutator m to `to` and returns the state it
  // was in, to be restored the same way (SafepointManager::SetState; the
  // states and their nesting are described in gc/safepoint.h). kBlocked
  // brackets a blocking wait (join, a lock, I/O), kNative agent code: in
  // either the thread neither reads nor writes heap objects nor holds raw
  // object addresses, so a safepoint need not wait for it. Returning to
  // kRunning waits while a safepoint is in progress. Use the scopes
  // (BlockedScope below; agent_api/thread_states.h), not this directly.
  virtual SafepointState SetSafepointState(Mutator* m, SafepointState to) = 0;

  // True when p points into the reserved heap range.
  virtual bool Contains(const void* p) const = 0;

  virtual HeapStats Stats() const = 0;
  // Every space's occupancy, read at a safepoint (TLABs count as used up to
  // their end). Empty when the world is stopped for good (VM death).
  // `requester` as for RunAtSafepoint.
  virtual std::vector<SpaceUsage> SpaceUsages(Mutator* requester) = 0;

  // Stops the world and calls fn(m) for every attached mutator (the requester
  // included) on the requester's thread, then restarts it. ReconfigureSampling
  // re-arms the samplers with it; the agent API reads stopped threads' stacks
  // with it. fn must not allocate or block. `requester` is the calling
  // thread's mutator, or null when the caller is not a mutator.
  virtual void RunAtSafepoint(Mutator* requester,
                              absl::FunctionRef<void(Mutator*)> fn) = 0;

  // For a thread that is not a mutator (an agent's own thread) and must read
  // objects: stops the world until ResumeWorld, since nothing else keeps a
  // collection from moving them meanwhile. Returns false, with nothing to
  // resume, when the world is stopped for good by another thread (VM death),
  // or when the calling thread owns the safepoint already (a heap walk's
  // callback: check SafepointOwnedByCallingThread first, the world is
  // stopped then and nothing needs doing).
  virtual bool StopWorld() = 0;
  virtual void ResumeWorld() = 0;
  // True while the calling thread owns the active safepoint.
  virtual bool SafepointOwnedByCallingThread() const = 0;

  // Stops the world and walks the object graph breadth-first on the
  // requester's thread (gc/heap_walker.h): from every root when start_slot
  // is null, else from the object in *start_slot (a root slot, read inside
  // the pause; an empty walk if it holds no reference). nullopt when no walk
  // ran: the world is stopped for good (VM death) by another thread. The
  // visitor must not allocate on the heap, collect or wait for a safepoint.
  virtual std::optional<HeapWalkStats> WalkHeap(Mutator* requester, const Value* start_slot,
                                                HeapWalkVisitor& visitor) = 0;

  // Weakly held slots (gc/weak_table.h). The observer, if any, receives the
  // events of every collection after its pause; null stops reporting.
  virtual WeakTable& weak_table() = 0;
  virtual void SetWeakObserver(WeakObserver* observer) = 0;

  // Heap sampling (gc/sampler.h). The observer owns the settings (which
  // threads sample, and the mean interval) and receives every sampled
  // allocation; null turns sampling off.
  virtual void SetSampleObserver(SampleObserver* observer) = 0;
  // Re-arms every thread's sampler at a safepoint with the observer's
  // current settings, so that a change takes effect at each thread's next
  // allocation (gc/sampler.h .rearm).
  virtual void ReconfigureSampling(Mutator* requester) = 0;
  // Collection start and finish, inside the pause.
  virtual void SetGcObserver(GcObserver* observer) = 0;

  // True for an object in the young generation (false: old or large).
  virtual bool IsYoung(const Object* obj) const = 0;
  // Collections so far; changes at every pause (the agent API re-indexes
  // tagged objects by address when it does).
  virtual uint64_t CollectionCount() const = 0;
  // VM death: stops every other mutator for good. The requester keeps the
  // world stopped and may still collect (see SafepointManager).
  virtual void StopMutatorsForExit(Mutator* requester) = 0;
};

// Brackets a blocking wait of the VM's own (see SetSafepointState). Nests:
// inside a callback (kNative) it moves the thread to kBlocked and back to
// kNative, never to kRunning.
class BlockedScope {
 public:
  explicit BlockedScope(Mutator* m)
      : m_(m), saved_(m_->heap->SetSafepointState(m_, SafepointState::kBlocked)) {}
  ~BlockedScope() { m_->heap->SetSafepointState(m_, saved_); }
  BlockedScope(const BlockedScope&) = delete;
  BlockedScope& operator=(const BlockedScope&) = delete;

 private:
  Mutator* m_;
  SafepointState saved_;
};

// Safepoint poll site: back-edges, calls, slow paths.
inline void SafepointPoll(Mutator* m) {
  if (ABSL_PREDICT_FALSE(m->poll.load(std::memory_order_acquire) != 0)) {
    m->heap->SafepointPoll(m);
  }
}

}  // namespace minivm::gc

#endif  // MINIVM_GC_HEAP_H_
