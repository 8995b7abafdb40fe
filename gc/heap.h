// The managed heap: the allocation entry point, collections, safepoints.
//
// All allocation — interpreter, JIT-compiled code, VM-internal (string
// constants, args(), concatenation) — goes through Allocate() below: an inline
// bump-pointer fast path on the thread's TLAB and one out-of-line slow path,
// Heap::AllocateSlow. The slow path is the only place that refills TLABs,
// allocates outside them, collects, and (later) samples. See docs/gc.md.
#ifndef MINIVM_GC_HEAP_H_
#define MINIVM_GC_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "absl/base/optimization.h"
#include "absl/status/statusor.h"
#include "gc/mutator.h"
#include "gc/object.h"
#include "gc/vm_interface.h"

namespace minivm::gc {

// Requests larger than this are refused up front (heap exhausted) so that
// `top + size` can never wrap on the fast path.
inline constexpr size_t kMaxObjectSize = size_t{1} << 40;

// Card marking: one byte per 512 bytes of reserved heap.
inline constexpr int kCardShift = 9;
inline constexpr uint8_t kCleanCard = 0;
inline constexpr uint8_t kDirtyCard = 1;

struct HeapOptions {
  size_t max_heap_bytes = size_t{256} << 20;  // --heap
  size_t young_bytes = 0;                     // --young; 0 = derived from max
  bool verbose_gc = false;                    // --verbose:gc, one line per GC on gc_log
  FILE* gc_log = stderr;
  bool verify_heap = false;       // --verify-heap: verify before and after each GC
  uint64_t gc_stress_every = 0;   // --gc-stress=N: collect at every N-th slow path
};

enum class GcCause {
  kAllocationFailure,  // eden or the old generation could not satisfy a request
  kExplicit,           // gc() or ForceGarbageCollection
  kStress,             // --gc-stress
};

struct HeapStats {
  uint64_t bytes_allocated = 0;  // total bytes handed out by the slow path's refills and direct allocations
  uint64_t minor_collections = 0;
  uint64_t full_collections = 0;
};

class Heap {
 public:
  virtual ~Heap() = default;

  // Reserves the whole heap up front (one contiguous mapping, so one card
  // table covers every space). Fails with a message for impossible sizes.
  static absl::StatusOr<std::unique_ptr<Heap>> Create(const HeapOptions& options,
                                                      VmInterface* vm);

  // Registers a thread with the heap. Its TLAB starts empty (all zeros).
  virtual void AttachMutator(Mutator* m) = 0;
  // Retires the thread's TLAB and forgets the thread. The thread must not
  // touch heap objects afterwards.
  virtual void DetachMutator(Mutator* m) = 0;

  // The allocation slow path. Precondition: size is the object's exact size
  // (a multiple of 8, at least 16, at most kMaxObjectSize). May collect: the
  // caller must hold every reference it still needs in a root. Returns the
  // object with its header written, its body zeroed and, for array layouts,
  // its length set; nullptr when even a full collection cannot find room
  // (the caller raises "heap exhausted").
  virtual Object* AllocateSlow(Mutator* m, const ClassLayout* cls, size_t size,
                               uint64_t length) = 0;

  // A full collection requested by the program or an agent.
  virtual void CollectGarbage(Mutator* requester, GcCause cause) = 0;

  // Called by a thread whose poll word is set; returns when the safepoint or
  // handshake that set it is over.
  virtual void SafepointPoll(Mutator* m) = 0;

  // Brackets a blocking wait (join, a lock, I/O) during which the thread
  // neither reads nor writes heap objects, so a safepoint need not wait for
  // it. Leave blocks while a safepoint is in progress.
  virtual void EnterBlocked(Mutator* m) = 0;
  virtual void LeaveBlocked(Mutator* m) = 0;

  // True when p points into the reserved heap range.
  virtual bool Contains(const void* p) const = 0;

  virtual HeapStats Stats() const = 0;
};

class BlockedScope {
 public:
  explicit BlockedScope(Mutator* m) : m_(m) { m_->heap->EnterBlocked(m_); }
  ~BlockedScope() { m_->heap->LeaveBlocked(m_); }
  BlockedScope(const BlockedScope&) = delete;
  BlockedScope& operator=(const BlockedScope&) = delete;

 private:
  Mutator* m_;
};

// Out of line and cold: the fast path below must stay a handful of
// instructions. Defined in heap.cc.
Object* AllocateSlowPath(Mutator* m, const ClassLayout* cls, size_t size,
                         uint64_t length);

// The allocation entry point. `size` must be the exact object size for `cls`
// and `length` (see object.h) and at most kMaxObjectSize. `length` is ignored
// for kFields layouts. May collect (see Heap::AllocateSlow).
inline Object* Allocate(Mutator* m, const ClassLayout* cls, size_t size,
                        uint64_t length) {
  const uintptr_t top = m->tlab.top;
  const uintptr_t new_top = top + size;
  if (ABSL_PREDICT_FALSE(new_top > m->tlab.current_end)) {
    return AllocateSlowPath(m, cls, size, length);
  }
  m->tlab.top = new_top;
  auto* obj = reinterpret_cast<Object*>(top);
  obj->klass = cls;  // gc_word and body are already zero: the TLAB is zero-filled
  if (cls->kind != LayoutKind::kFields) obj->set_length(length);
  return obj;
}

// The write barrier: every store of a Value into a heap object goes through
// it (interpreter now, inlined by the JIT later). Marks the card holding the
// object's header when a reference is stored, so a minor collection finds
// old-to-young edges by scanning dirty cards (docs/gc.md).
inline void WriteBarrier(Mutator* m, Object* holder, Value stored) {
  if (stored.IsRef()) {
    m->card_table_biased[reinterpret_cast<uintptr_t>(holder) >> kCardShift] =
        kDirtyCard;
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
