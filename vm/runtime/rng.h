// The per-thread generator behind `rand(n)`: xoshiro256** (base/xoshiro.h, the
// generator the heap sampler uses too) seeded through splitmix64 from
// (--seed, the thread's spawn index), so every thread's sequence is fixed by
// the seed and independent of scheduling.
#ifndef MINIVM_VM_RUNTIME_RNG_H_
#define MINIVM_VM_RUNTIME_RNG_H_

#include <cstdint>

#include "base/xoshiro.h"

namespace minivm {

class Rng {
 public:
  Rng() : Rng(0, 0) {}
  Rng(uint64_t seed, uint64_t stream) : xoshiro_(seed ^ (stream * 0xD1B54A32D192ED03ull)) {}

  uint64_t Next() { return xoshiro_.NextStarStar(); }

  // Uniform in [0, n) for n > 0, without modulo bias (rejection sampling).
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
      x = Next();
    } while (x >= limit);
    return x % n;
  }

 private:
  base::Xoshiro256 xoshiro_;
};

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_RNG_H_
