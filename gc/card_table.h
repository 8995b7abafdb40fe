// The card table: one byte per 512-byte card of the whole reserved heap.
//
// .one-table  One table covers every space because the heap is one contiguous
//    reservation; the write barrier (write_barrier.h) indexes it with a biased base,
//    so it is a shift, an add and a byte store, with no range check.
// .header-card  The barrier dirties the card of the *holder's header*, never of the
//    slot. Card scanning therefore visits the objects whose header lies in a
//    dirty card and scans each of them whole. Rejected: slot-precise marking
//    (HotSpot's), which needs a block-offset table to find the object
//    covering a card; our size-class pages make header-starts computable.
// .young-cards  Cards of young spaces get dirtied too (the barrier does not filter the
//    holder) and are simply never read; filtering would cost a compare on
//    every store for nothing.
// .clean  After a minor collection a scanned card is clean unless an object
//    starting in it still references the young generation.
#ifndef MINIVM_GC_CARD_TABLE_H_
#define MINIVM_GC_CARD_TABLE_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "gc/write_barrier.h"

namespace minivm::gc {

inline constexpr size_t kCardSize = size_t{1} << kCardShift;

class CardTable {
 public:
  CardTable() = default;
  ~CardTable();
  CardTable(const CardTable&) = delete;
  CardTable& operator=(const CardTable&) = delete;

  absl::Status Init(uintptr_t heap_base, size_t heap_size);

  // What Mutator::card_table_biased holds.
  uint8_t* biased() const { return biased_; }

  uint8_t* CardFor(uintptr_t addr) const { return biased_ + (addr >> kCardShift); }
  void Dirty(uintptr_t addr) const { *CardFor(addr) = kDirtyCard; }
  bool IsDirty(uintptr_t addr) const { return *CardFor(addr) != kCleanCard; }

  // Calls fn(card_start) for every dirty card in [from, to) (card-aligned),
  // skipping clean cards eight at a time.
  void ForEachDirtyCard(uintptr_t from, uintptr_t to, absl::FunctionRef<void(uintptr_t)> fn) const;
  void Clear(uintptr_t from, uintptr_t to) const;

 private:
  uint8_t* cards_ = nullptr;
  size_t bytes_ = 0;
  uint8_t* biased_ = nullptr;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_CARD_TABLE_H_
