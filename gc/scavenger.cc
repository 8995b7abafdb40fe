#include "gc/scavenger.h"

#include <algorithm>
#include <cstring>

#include "gc/check.h"

namespace minivm::gc {

Scavenger::Scavenger(YoungGen& young, OldSpace& old, const CardTable& cards,
                     uint32_t tenuring_threshold, bool promote_all)
    : young_(young),
      old_(old),
      cards_(cards),
      threshold_(tenuring_threshold),
      promote_all_(promote_all),
      scan_(young.to().top) {}

void Scavenger::VisitRoots(Value* begin, Value* end) {
  for (Value* s = begin; s < end; ++s) Evacuate(s);
}

Object* Scavenger::Copy(Object* obj) {
  MINIVM_GC_DCHECK(obj->klass != nullptr, "evacuating %p, which has no klass", obj);
  const size_t size = obj->Size();
  MINIVM_GC_CHECK(size <= kLargeObjectThreshold, "young object %p has size %d", obj, size);
  const uint32_t age = obj->Age();
  const uint32_t new_age = std::min<uint32_t>(age + 1, gc_word::kMaxAge);
  SemiSpace& to = young_.to();
  Object* dst;
  if (!promote_all_ && age < threshold_ && to.limit - to.top >= size) {
    dst = reinterpret_cast<Object*>(to.top);
    to.top += size;
    age_bytes_[new_age] += size;
    survived_bytes_ += size;
  } else {
    dst = old_.AllocateSmall(size);
    MINIVM_GC_CHECK(dst != nullptr,
                    "promotion of a %d-byte object failed despite the promotion guarantee", size);
    promoted_.push_back(dst);
    promoted_bytes_ += size;
  }
  std::memcpy(dst, obj, size);
  dst->gc_word = uint64_t{new_age} << gc_word::kAgeShift;
  obj->gc_word = reinterpret_cast<uint64_t>(dst) | gc_word::kForwarded;
  return dst;
}

void Scavenger::ScanDirtyCards() {
  cards_.ForEachDirtyCard(old_.base(), old_.used_limit(), [&](uintptr_t card) {
    bool young_ref = false;
    old_.ForEachObjectStartingIn(card, card + kCardSize,
                                 [&](Object* o) { young_ref |= ScanObject(o); });
    *cards_.CardFor(card) = young_ref ? kDirtyCard : kCleanCard;
  });
}

void Scavenger::Drain() {
  SemiSpace& to = young_.to();
  for (;;) {
    if (scan_ < to.top) {
      auto* obj = reinterpret_cast<Object*>(scan_);
      scan_ += obj->Size();
      ScanObject(obj);
    } else if (!promoted_.empty()) {
      Object* obj = promoted_.back();
      promoted_.pop_back();
      if (ScanObject(obj)) cards_.Dirty(reinterpret_cast<uintptr_t>(obj));
    } else {
      break;
    }
  }
}

bool Scavenger::WeakFate(Object* obj, WeakTable::Fate* fate) const {
  if (!young_.InCollectionSet(reinterpret_cast<uintptr_t>(obj))) return false;
  if (!obj->IsForwarded()) {
    *fate = {WeakEventKind::kDied, nullptr};
  } else {
    Object* to = obj->Forwardee();
    fate->new_address = to;
    fate->kind = young_.Contains(reinterpret_cast<uintptr_t>(to)) ? WeakEventKind::kMoved
                                                                  : WeakEventKind::kPromoted;
  }
  return true;
}

}  // namespace minivm::gc
