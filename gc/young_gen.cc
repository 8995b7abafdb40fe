#include "gc/young_gen.h"

#include <algorithm>

namespace minivm::gc {

YoungGen::YoungGen(uintptr_t base, size_t eden, size_t survivor, size_t initial_eden)
    : base_(base),
      eden_limit_(base + eden),
      limit_(base + eden + 2 * survivor),
      eden_end_(base + std::min(eden, initial_eden)),
      eden_top_(base) {
  survivors_[0] = SemiSpace{eden_limit_, eden_limit_ + survivor, eden_limit_};
  survivors_[1] = SemiSpace{eden_limit_ + survivor, limit_, eden_limit_ + survivor};
}

void YoungGen::SetEdenCapacity(size_t bytes) {
  eden_end_.store(base_ + std::min(bytes, eden_reserved()), std::memory_order_relaxed);
}

void YoungGen::FinishScavenge() {
  eden_top_.store(base_, std::memory_order_relaxed);
  from().top = from().base;
  from_ = 1 - from_;
}

void YoungGen::ResetAll() {
  eden_top_.store(base_, std::memory_order_relaxed);
  survivors_[0].top = survivors_[0].base;
  survivors_[1].top = survivors_[1].base;
}

}  // namespace minivm::gc
