// The young generation: eden and two survivor semispaces, contiguous at the
// bottom of the reservation.
//
//   young_base                                              young_limit
//   | eden (TLABs, outside-TLAB objects)  | survivor 0 | survivor 1 |
//
// .bump  Eden is a shared bump pointer advanced with a CAS: TLAB refills and
//    outside-TLAB objects never take a lock. Eden is never cleared in bulk:
//    each object is zeroed by the code that allocates it (tlab.h), so a pause
//    never touches eden and its cost stays proportional to the survivors.
// .parsable  Eden is parsable below its top, to the verifier (the only walker): it
//    is a sequence of objects (non-null, 8-aligned klass word), zero words
//    (eden never written; skipped one by one), filler words that cover
//    a retired TLAB's unused tail (FillerWord: odd, so never a klass), and
//    the unused tails of live TLABs, which hold stale bytes and which the
//    walker skips by the owning thread's Tlab.
// .survivors  Survivors are filled by the scavenger only; a semispace is parsable
//    below its top (objects back to back).
// .capacity  Eden's reservation is fixed; the part allocation may use before a
//    collection (eden_capacity) starts smaller and only grows, set inside a
//    pause by the collection plan (collection.cc .eden-sizing). Survivors are
//    sized for the whole reservation. InEden covers the reservation, so
//    resizing never changes which objects a collection evacuates.
#ifndef MINIVM_GC_YOUNG_GEN_H_
#define MINIVM_GC_YOUNG_GEN_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace minivm::gc {

// The first word of a retired TLAB's unused tail of `bytes` bytes (a
// multiple of 8, at least 8): odd, so a walker tells it from a klass
// pointer, and it says how far to skip. The rest of the tail is stale.
inline constexpr uint64_t FillerWord(size_t bytes) { return (uint64_t{bytes} << 1) | 1; }
inline constexpr bool IsFillerWord(uint64_t word) { return (word & 1) != 0; }
inline constexpr size_t FillerBytes(uint64_t word) { return static_cast<size_t>(word >> 1); }

struct SemiSpace {
  uintptr_t base = 0;
  uintptr_t limit = 0;
  uintptr_t top = 0;  // written only inside a pause
  bool Contains(uintptr_t p) const { return p - base < limit - base; }
  size_t used() const { return top - base; }
  size_t capacity() const { return limit - base; }
};

class YoungGen {
 public:
  // [base, base + eden) is eden's reservation, then two survivors of
  // `survivor` bytes. Allocation uses the first `initial_eden` bytes of eden
  // (at most `eden`) until SetEdenCapacity grows it.
  YoungGen(uintptr_t base, size_t eden, size_t survivor, size_t initial_eden);

  // Bump-allocates `bytes` of eden (not zeroed); 0 when eden is full.
  uintptr_t AllocateEden(size_t bytes) {
    uintptr_t top = eden_top_.load(std::memory_order_relaxed);
    do {
      if (eden_end_.load(std::memory_order_relaxed) - top < bytes) return 0;
    } while (!eden_top_.compare_exchange_weak(top, top + bytes, std::memory_order_relaxed));
    return top;
  }

  bool Contains(uintptr_t p) const { return p - base_ < limit_ - base_; }
  bool InEden(uintptr_t p) const { return p - base_ < eden_limit_ - base_; }
  // The spaces a minor collection evacuates: eden and the from-survivor.
  bool InCollectionSet(uintptr_t p) const { return InEden(p) || from().Contains(p); }

  uintptr_t base() const { return base_; }
  uintptr_t limit() const { return limit_; }
  uintptr_t eden_base() const { return base_; }
  uintptr_t eden_limit() const { return eden_limit_; }
  uintptr_t eden_top() const { return eden_top_.load(std::memory_order_relaxed); }
  size_t eden_used() const { return eden_top() - base_; }
  // What eden may hold before a collection; at most eden_reserved().
  size_t eden_capacity() const { return eden_end_.load(std::memory_order_relaxed) - base_; }
  size_t eden_reserved() const { return eden_limit_ - base_; }
  // Inside a pause only, so no allocation runs meanwhile. Atomic all the
  // same: a thread that is attaching reads eden's capacity to size its
  // TLABs before the safepoint protocol covers it.
  void SetEdenCapacity(size_t bytes);

  SemiSpace& from() { return survivors_[from_]; }
  SemiSpace& to() { return survivors_[1 - from_]; }
  const SemiSpace& from() const { return survivors_[from_]; }
  const SemiSpace& to() const { return survivors_[1 - from_]; }

  size_t used() const { return eden_used() + from().used(); }
  // The young generation's reservation.
  size_t capacity() const { return eden_reserved() + 2 * survivors_[0].capacity(); }

  // After a minor collection: eden and from are empty, survivors sit in to,
  // which becomes from.
  void FinishScavenge();
  // After a full collection that evacuated everything to the old generation.
  void ResetAll();

 private:
  const uintptr_t base_;
  const uintptr_t eden_limit_;  // end of eden's reservation
  const uintptr_t limit_;
  std::atomic<uintptr_t> eden_end_;  // end of what allocation may use (.capacity)
  std::atomic<uintptr_t> eden_top_;
  SemiSpace survivors_[2];
  int from_ = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_YOUNG_GEN_H_
