// Evacuation of the young generation: Cheney's breadth-first copying.
//
// Design:
// .cheney  The to-survivor is its own scan queue (Cheney): objects are copied to
//    its top and scanned from a trailing pointer, so the pause touches only
//    survivors, roots and dirty cards: it is proportional to what survives,
//    never to eden. Promoted objects land in old-space cells, which are not
//    contiguous, so they go on an explicit stack instead.
// .forwarding  Forwarding: the from-copy's gc_word becomes the new address | 1. The
//    copy's gc_word holds only its new age (marks and forwarding cleared).
// .tenuring  Tenuring: an object whose age (minor collections survived before this
//    one) is below the threshold is copied to the to-survivor, otherwise
//    promoted; when the survivor overflows, the rest are promoted early
//    (premature promotion). Bytes per new age feed the adaptive threshold.
// .cards  Old-to-young edges come from dirty cards of the old range (card
//    scanning, card_table.h); a scanned card is left dirty only if an object
//    starting in it still refers to a young object, and a promoted object that
//    refers to a young survivor dirties its own card. So after every
//    collection each old->young edge has a dirty card (verified).
// .no-failure  Promotion cannot fail: the GC starts a minor collection only
//    when the old generation can absorb every young byte in the worst case
//    (the promotion guarantee, collection.cc), and a full collection only
//    evacuates after checking the exact need. A failure is a CHECK.
// Rejected: depth-first copying (better locality for some graphs, but needs
// a stack proportional to depth); handling promotion failure by
// self-forwarding (HotSpot ParNew), whose repair paths are the buggiest part
// of any copying GC.
#ifndef MINIVM_GC_SCAVENGER_H_
#define MINIVM_GC_SCAVENGER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gc/card_table.h"
#include "gc/object.h"
#include "gc/old_space.h"
#include "gc/vm_interface.h"
#include "gc/weak_table.h"
#include "gc/young_gen.h"

namespace minivm::gc {

class Scavenger final : public RootVisitor {
 public:
  // promote_all: every survivor goes to the old generation (full collection).
  Scavenger(YoungGen& young, OldSpace& old, const CardTable& cards, uint32_t tenuring_threshold,
            bool promote_all);

  void VisitRoots(Value* begin, Value* end) override;
  // Treats every object starting in a dirty card of the old range as a root.
  void ScanDirtyCards();
  // Copies everything reachable from what was visited so far.
  void Drain();
  // The weak-table fate of an object that was in eden or from-space.
  bool WeakFate(Object* obj, WeakTable::Fate* fate) const;

  const std::array<uint64_t, gc_word::kMaxAge + 1>& age_bytes() const { return age_bytes_; }
  uint64_t survived_bytes() const { return survived_bytes_; }
  uint64_t promoted_bytes() const { return promoted_bytes_; }

 private:
  // Evacuates the referent of *slot if it is in the collection set and
  // updates the slot. Returns true when *slot now refers to a young object.
  bool Evacuate(Value* slot) {
    const uint64_t bits = slot->bits();
    if ((bits & 1) != 0 || bits == 0) return false;
    if (!young_.InCollectionSet(bits)) return young_.Contains(bits);
    auto* obj = reinterpret_cast<Object*>(bits);
    Object* copy = obj->IsForwarded() ? obj->Forwardee() : Copy(obj);
    *slot = Value::Ref(copy);
    return young_.Contains(reinterpret_cast<uintptr_t>(copy));
  }
  bool ScanObject(Object* obj) {
    bool young_ref = false;
    for (Value *s = obj->SlotsBegin(), *e = obj->SlotsEnd(); s < e; ++s) {
      young_ref |= Evacuate(s);
    }
    return young_ref;
  }
  Object* Copy(Object* obj);

  YoungGen& young_;
  OldSpace& old_;
  const CardTable& cards_;
  const uint32_t threshold_;
  const bool promote_all_;
  uintptr_t scan_;
  std::vector<Object*> promoted_;
  std::array<uint64_t, gc_word::kMaxAge + 1> age_bytes_{};
  uint64_t survived_bytes_ = 0;
  uint64_t promoted_bytes_ = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_SCAVENGER_H_
