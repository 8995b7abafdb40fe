// xoshiro256 (Blackman and Vigna, "Scrambled linear pseudorandom number
// generators", 2021), seeded through splitmix64: the one pseudo-random
// generator of minivm. The heap sampler draws its gaps from it (gc/sampler.h)
// and `rand(n)` its numbers (vm/runtime/rng.h). It lives in base/, the layer
// both gc/ and vm/ may include (docs/architecture.md), and depends on nothing.
//
// One state, two output scramblers, because both sequences are fixed by
// --seed and users rely on that (docs/language.md, rand; docs/sampling.md,
// reproducible runs): the sampler uses ++ and rand() **, and switching
// either would change every seeded run. The state transition, the
// seeding and the splitmix64 mixer are shared. Abseil's generators are not
// used: they do not promise stable sequences across releases.
#ifndef MINIVM_BASE_XOSHIRO_H_
#define MINIVM_BASE_XOSHIRO_H_

#include <cstdint>

namespace minivm::base {

// splitmix64's step: advances `state` and returns the next output.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed = 0) { Seed(seed); }

  // The state is four successive splitmix64 outputs from `seed`, so any
  // seed (0 included) gives a valid, non-zero state.
  void Seed(uint64_t seed) {
    for (uint64_t& s : s_) s = SplitMix64(seed);
  }

  // xoshiro256++ (the heap sampler's output).
  uint64_t NextPlusPlus() {
    const uint64_t result = Rotl(s_[0] + s_[3], 23) + s_[0];
    Advance();
    return result;
  }

  // xoshiro256** (rand()'s output).
  uint64_t NextStarStar() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    Advance();
    return result;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  void Advance() {
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
  }

  uint64_t s_[4];
};

}  // namespace minivm::base

#endif  // MINIVM_BASE_XOSHIRO_H_
