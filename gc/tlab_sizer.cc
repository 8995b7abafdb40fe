#include "gc/tlab_sizer.h"

#include <algorithm>

namespace minivm::gc {

void TlabSizer::Init(size_t eden_capacity, size_t threads) {
  fraction_ = 1.0 / static_cast<double>(std::max<size_t>(threads, 1));
  Resize(eden_capacity);
}

void TlabSizer::SetFixed(size_t bytes) {
  fixed_ = bytes & ~size_t{7};
  desired_ = fixed_;
  waste_limit_ = 0;
}

void TlabSizer::Resize(size_t eden_capacity) {
  if (fixed_ != 0) return;
  const size_t max = std::max(kMinTlabBytes, std::min(kMaxTlabBytes, eden_capacity / 8));
  const double want = static_cast<double>(eden_capacity) * fraction_ / kTargetRefills;
  desired_ = std::clamp(static_cast<size_t>(want), kMinTlabBytes, max) & ~size_t{7};
  waste_limit_ = desired_ / kRefillWasteFraction;
}

bool TlabSizer::ShouldAllocateOutside(size_t tlab_free, size_t size) {
  if (size > desired_) return true;
  if (fixed_ != 0) return false;
  if (tlab_free > waste_limit_) {
    waste_limit_ += kWasteIncrement;
    return true;
  }
  return false;
}

void TlabSizer::RecordRefill(size_t) { ++refills_; }

void TlabSizer::OnCollection(size_t eden_used, size_t eden_capacity) {
  if (eden_used > 0) {
    const double sample =
        std::min(1.0, static_cast<double>(allocated_since_gc_) / static_cast<double>(eden_used));
    fraction_ = (1 - kAllocationFractionWeight) * fraction_ + kAllocationFractionWeight * sample;
  }
  allocated_since_gc_ = 0;
  Resize(eden_capacity);
}

}  // namespace minivm::gc
