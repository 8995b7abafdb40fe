// The write barrier: the card mark every store of a reference into a heap
// object makes, so that a minor collection finds old-to-young edges by
// scanning dirty cards (gc/card_table.h, docs/gc.md).
//
// Design
// ------
// .card: one byte per 512-byte card of the whole reservation, indexed by the
//   object's header address through the biased base in
//   Mutator::card_table_biased: a shift, an add and a byte store.
// .header: the card holding the holder's header is marked, not the slot's:
//   a minor collection scans the objects that start in a dirty card.
// .relaxed: the store is a relaxed atomic byte store (a plain `mov` on x86
//   and AArch64): threads dirtying the same card concurrently is benign, and
//   this says so to the compiler and to TSan. The GC reads cards only inside
//   a pause, after the safepoint's synchronisation.
// .copies: JIT-compiled code inlines the same store (EmitCardMark, vm/jit/).
//
// Rejected: a remembered set of slots (a branch and a buffer push per store,
// where the card mark is one unconditional byte store); marking every store,
// references or not (dirties cards that hold no young reference).
#ifndef MINIVM_GC_WRITE_BARRIER_H_
#define MINIVM_GC_WRITE_BARRIER_H_

#include <atomic>
#include <cstdint>

#include "gc/mutator.h"
#include "gc/object.h"

namespace minivm::gc {

// Card marking: one byte per 512 bytes of reserved heap.
inline constexpr int kCardShift = 9;
inline constexpr uint8_t kCleanCard = 0;
inline constexpr uint8_t kDirtyCard = 1;

// Every store of a Value into a heap object goes through this (.card,
// .relaxed); it marks only when a reference is stored.
inline void WriteBarrier(Mutator* m, Object* holder, Value stored) {
  if (stored.IsRef()) {
    std::atomic_ref<uint8_t>(
        m->card_table_biased[reinterpret_cast<uintptr_t>(holder) >> kCardShift])
        .store(kDirtyCard, std::memory_order_relaxed);
  }
}

}  // namespace minivm::gc

#endif  // MINIVM_GC_WRITE_BARRIER_H_
