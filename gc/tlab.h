// A thread-local allocation buffer: the bump-pointer region one mutator
// allocates from without synchronisation.
//
//   start          top                 current_end            end
//     |  allocated  |       free           |   free (sampling)   |
//     +-------------+----------------------+---------------------+
//
// Design
// ------
// .invariants  start <= top <= current_end <= end, and current_end == end
//   whenever no sample point falls inside [top, end). The heap verifier
//   CHECKs them under --verify-heap; the slow path DCHECKs the first on
//   every return (gc/sampler.h .scopes: the slow-path scope arms on exit).
//
// .current-end  The inline fast path (gc::Allocate in gc/allocation.h, and
//   the JIT's copy of it, EmitNew in vm/jit/) compares a bumped `top`
//   against `current_end`; its only other test keeps objects above
//   kMaxTlabObjectSize out of TLABs. The two reasons for a TLAB-sized
//   allocation to leave the fast path, the TLAB is full or a sample point is
//   due, are both expressed by `current_end` (the sampler lowers it to the
//   next point, gc/sampler.h .arm); the slow path recomputes it every time
//   it runs. Safepoints do not touch it: they set the thread's poll word
//   (gc/mutator.h).
//
// .empty  A collection retires every TLAB (all four fields zero). An empty
//   TLAB is all zeros, so a thread's first allocation after attaching or
//   after a collection takes the slow path with no special case.
//
// .not-zeroed  [top, end) is NOT zeroed: it holds whatever eden held before
//   the last collection. Every allocation zeroes its own object (the gc_word
//   and the body) as it initialises it, as HotSpot does with ZeroTLAB off;
//   compiled code leaves out the fields it stores itself before any GC
//   point, when nothing can see them (the JIT's .alloc.zeroing). Retiring
//   writes a filler word over the tail (young_gen.h), so eden stays
//   parsable.
//   Rejected: zeroing the whole TLAB at refill. It writes every byte twice,
//   once in a memset that runs ahead of the objects and once in the
//   objects' own stores (binary trees spent 14% of its time in that memset,
//   docs/performance.md).
#ifndef MINIVM_GC_TLAB_H_
#define MINIVM_GC_TLAB_H_

#include <cstddef>
#include <cstdint>

namespace minivm::gc {

struct Tlab {
  uintptr_t top = 0;          // offset 0: next free byte
  uintptr_t current_end = 0;  // offset 8: the fast path's limit
  uintptr_t end = 0;          // offset 16: real end of the buffer
  uintptr_t start = 0;        // offset 24: first byte of the buffer

  size_t used() const { return top - start; }
  size_t free() const { return end - top; }
};

// The JIT emits loads and stores at these offsets; keep them fixed.
static_assert(offsetof(Tlab, top) == 0);
static_assert(offsetof(Tlab, current_end) == 8);
static_assert(offsetof(Tlab, end) == 16);

}  // namespace minivm::gc

#endif  // MINIVM_GC_TLAB_H_
