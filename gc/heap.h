// The managed heap: the allocation entry point, collections, safepoints.
//
// All allocation — interpreter, built-ins, VM-internal (string constants,
// args(), concatenation) — goes through Allocate() below: an inline
// bump-pointer fast path on the thread's TLAB and one out-of-line slow path,
// AllocateSlowPath. JIT-compiled code inlines the same fast path and calls
// the same slow path (the JIT's EmitNew, vm/jit/). The slow path is the only
// place that refills TLABs, allocates outside them, collects, and samples.
// See docs/gc.md, and docs/architecture.md for one allocation followed from
// the bytecode to the agent's callback.
#ifndef MINIVM_GC_HEAP_H_
#define MINIVM_GC_HEAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

// Requests larger than this are refused up front (heap exhausted) so that
// `top + size` can never wrap on the fast path.
inline constexpr size_t kMaxObjectSize = size_t{1} << 40;

// Card marking: one byte per 512 bytes of reserved heap.
inline constexpr int kCardShift = 9;
inline constexpr uint8_t kCleanCard = 0;
inline constexpr uint8_t kDirtyCard = 1;

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
  kOldTarget,          // the old generation passed its occupancy target (collection.cc, design 7)
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
  // allocation (gc/sampler.h, design point 6).
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

// The allocation slow path, the one out-of-line half of Allocate() below
// and the function JIT-compiled code calls when its inline fast path fails
// (through minivm_jit_new). Out of line and cold: the fast path must stay a
// handful of instructions. Defined in heap.cc, where its design is.
//
// Precondition: size is the object's exact size (a multiple of 8, at least
// 16, at most kMaxObjectSize). May collect: the caller must hold every
// reference it still needs in a root. Returns the object with its header
// written, its body zeroed and, for array layouts, its length set; nullptr
// when even a full collection cannot find room (the caller raises "heap
// exhausted").
Object* AllocateSlowPath(Mutator* m, const ClassLayout* cls, size_t size,
                         uint64_t length);

// Objects larger than this never go into a TLAB or the young generation:
// they are allocated in the old generation's large-object space by the slow
// path (gc/size_classes.h; equal to kLargeObjectThreshold there).
inline constexpr size_t kMaxTlabObjectSize = size_t{8} << 10;

// Zeroes the gc_word and the body of the object of `size` bytes at `obj`.
// A TLAB is not zeroed in advance (tlab.h), so every allocation does this
// while it writes the object's first line anyway. Objects of up to 64 bytes
// (field objects of up to 6 fields, the common case) take unrolled stores: a
// call to memset for each made the interpreter slower on binary trees 16
// (1.07x CPU, benchmarks/compare_builds.py, 5 rounds).
inline void ZeroAllButKlass(uintptr_t obj, size_t size) {
  auto* w = reinterpret_cast<uint64_t*>(obj);
  switch (size / 8) {
    case 8:
      w[7] = 0;
      [[fallthrough]];
    case 7:
      w[6] = 0;
      [[fallthrough]];
    case 6:
      w[5] = 0;
      [[fallthrough]];
    case 5:
      w[4] = 0;
      [[fallthrough]];
    case 4:
      w[3] = 0;
      [[fallthrough]];
    case 3:
      w[2] = 0;
      [[fallthrough]];
    case 2:
      w[1] = 0;
      break;
    default:
      std::memset(w + 1, 0, size - 8);
  }
}

// The allocation entry point. `size` must be the exact object size for `cls`
// and `length` (see object.h) and at most kMaxObjectSize. `length` is ignored
// for kFields layouts. May collect (see AllocateSlowPath).
//
// The size test is a constant fold for field objects (their size is known at
// the call site) and one compare for arrays; it keeps large arrays out of
// TLABs so that every young object fits an old-generation size class.
inline Object* Allocate(Mutator* m, const ClassLayout* cls, size_t size,
                        uint64_t length) {
  const uintptr_t top = m->tlab.top;
  const uintptr_t new_top = top + size;
  if (ABSL_PREDICT_FALSE(new_top > m->tlab.current_end ||
                         size > kMaxTlabObjectSize)) {
    return AllocateSlowPath(m, cls, size, length);
  }
  m->tlab.top = new_top;
  auto* obj = reinterpret_cast<Object*>(top);
  ZeroAllButKlass(top, size);
  obj->klass = cls;
  if (cls->kind != LayoutKind::kFields) obj->set_length(length);
  return obj;
}

// The write barrier: every store of a Value into a heap object goes through
// it; JIT-compiled code inlines the same store (EmitCardMark, vm/jit/). Marks
// the card holding the object's header when a reference is stored, so a
// minor collection finds old-to-young edges by scanning dirty cards
// (docs/gc.md).
//
// The store is a relaxed atomic byte store (a plain `mov` on x86 and
// AArch64): threads dirtying the same card concurrently is benign, and this
// says so to the compiler and to TSan. The GC reads cards only inside
// a pause, after the safepoint's synchronisation.
inline void WriteBarrier(Mutator* m, Object* holder, Value stored) {
  if (stored.IsRef()) {
    std::atomic_ref<uint8_t>(
        m->card_table_biased[reinterpret_cast<uintptr_t>(holder) >> kCardShift])
        .store(kDirtyCard, std::memory_order_relaxed);
  }
}

// Safepoint poll site: back-edges, calls, slow paths.
inline void SafepointPoll(Mutator* m) {
  if (ABSL_PREDICT_FALSE(m->poll.load(std::memory_order_acquire) != 0)) {
    m->heap->SafepointPoll(m);
  }
}

}  // namespace minivm::gc

#endif  // MINIVM_GC_HEAP_H_
