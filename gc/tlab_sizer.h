// Adaptive TLAB sizing, after HotSpot's ThreadLocalAllocBuffer.
//
// .share  Each thread's TLAB size targets kTargetRefills refills per epoch (the
//    time between two collections): desired = eden capacity x the thread's
//    share of eden allocation / kTargetRefills. The share is an exponential
//    average (weight kAllocationFractionWeight) updated at every collection
//    from the bytes the thread allocated since the previous one, so a busy
//    thread gets large TLABs and an idle one small TLABs, and eden is not
//    parcelled out to threads that will not use it.
// .clamp  Clamped to [kMinTlabBytes, min(kMaxTlabBytes, eden / 8)].
// .waste  Refill waste limit: when the current TLAB still has more free bytes than
//    desired / kRefillWasteFraction, an object that does not fit is allocated
//    outside the TLAB (in eden directly) instead of throwing the tail away;
//    each such allocation raises the limit by kWasteIncrement so a thread
//    that keeps missing eventually refills. Objects larger than the desired
//    size always go outside.
// Rejected: one fixed size (wastes eden with many threads, refills too often
// with one busy thread).
#ifndef MINIVM_GC_TLAB_SIZER_H_
#define MINIVM_GC_TLAB_SIZER_H_

#include <cstddef>
#include <cstdint>

namespace minivm::gc {

inline constexpr size_t kMinTlabBytes = size_t{2} << 10;
inline constexpr size_t kMaxTlabBytes = size_t{1} << 20;
inline constexpr unsigned kTargetRefills = 50;
inline constexpr unsigned kRefillWasteFraction = 64;
inline constexpr size_t kWasteIncrement = 32;
inline constexpr double kAllocationFractionWeight = 0.35;

class TlabSizer {
 public:
  TlabSizer() = default;
  // Initial share: 1 / threads.
  void Init(size_t eden_capacity, size_t threads);
  // Pins the TLAB size (--tlab-size, for tests that vary it): no adaptation,
  // and every object that does not fit the rest of the TLAB triggers a
  // refill unless it is larger than a whole TLAB.
  void SetFixed(size_t bytes);

  size_t desired_bytes() const { return desired_; }
  size_t refill_waste_limit() const { return waste_limit_; }

  // True when an object of `size` should bypass a TLAB with `tlab_free` bytes
  // left; records the decision.
  bool ShouldAllocateOutside(size_t tlab_free, size_t size);
  void RecordRefill(size_t tlab_bytes);
  void RecordAllocatedBytes(size_t bytes) { allocated_since_gc_ += bytes; }

  // At every collection (inside the pause).
  void OnCollection(size_t eden_used, size_t eden_capacity);

  uint64_t refills() const { return refills_; }
  double allocation_fraction() const { return fraction_; }

 private:
  void Resize(size_t eden_capacity);

  size_t fixed_ = 0;  // 0: adaptive
  double fraction_ = 1.0;
  size_t desired_ = kMinTlabBytes;
  size_t waste_limit_ = kMinTlabBytes / kRefillWasteFraction;
  uint64_t allocated_since_gc_ = 0;
  uint64_t refills_ = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_TLAB_SIZER_H_
