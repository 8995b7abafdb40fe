#include "gc/sampler.h"

#include <math.h>

#include <algorithm>
#include <cmath>

#include "gc/check.h"

namespace minivm::gc {
namespace {

// std::lgamma writes the global `signgam`: a data race when several threads
// sample large objects at once. lgamma_r keeps the sign local.
double LogGamma(double x) {
  int sign;
  return lgamma_r(x, &sign);
}

// A thread's generator: distinct, decorrelated streams per thread, and per
// `stream` within one thread (splitmix64 of a mix of all three).
SamplerRandom ThreadRandom(uint64_t vm_seed, uint64_t thread_index, uint64_t stream) {
  uint64_t mix =
      vm_seed ^ (thread_index * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull) ^ stream;
  return SamplerRandom(base::SplitMix64(mix));
}

constexpr uint64_t kSamplerStream = 0;
constexpr uint64_t kThinningStream = 0x7468696E6E696E67ull;  // "thinning"

}  // namespace

double SamplerRandom::NextOpenClosed() {
  return static_cast<double>((Next() >> 11) + 1) * 0x1.0p-53;
}

double SamplerRandom::NextExponential(double mean) {
  return -std::log(NextOpenClosed()) * mean;
}

uint64_t SamplerRandom::NextPoisson(double mean) {
  if (!(mean > 0)) return 0;
  if (mean < 16) {
    // Count unit-rate exponential gaps that fit in `mean`.
    uint64_t k = 0;
    double t = -std::log(NextOpenClosed());
    while (t < mean) {
      ++k;
      t -= std::log(NextOpenClosed());
    }
    return k;
  }
  // PTRS: Hormann, "The transformed rejection method for generating Poisson
  // random variables", Insurance: Mathematics and Economics 12 (1993).
  const double slam = std::sqrt(mean);
  const double loglam = std::log(mean);
  const double b = 0.931 + 2.53 * slam;
  const double a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2);
  for (;;) {
    const double u = NextOpenClosed() - 0.5;
    const double v = NextOpenClosed();
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2 * a / us + b) * u + mean + 0.43);
    if (us >= 0.07 && v <= vr) return static_cast<uint64_t>(k);
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b) <=
        -mean + k * loglam - LogGamma(k + 1)) {
      return static_cast<uint64_t>(k);
    }
  }
}

void SampleThinner::Seed(uint64_t vm_seed, uint64_t thread_index) {
  random_ = ThreadRandom(vm_seed, thread_index, kThinningStream);
}

SampleDecision SampleThinner::Thin(const SampleDecision& decision, size_t size,
                                   int32_t interval) {
  if (interval <= decision.interval || decision.sample_count == 0) return decision;
  SampleDecision thinned;
  thinned.interval = interval;
  if (decision.interval == 0) {
    thinned.sample_count =
        random_.NextPoisson(static_cast<double>(size) / static_cast<double>(interval));
  } else {
    thinned.sample_count =
        Binomial(decision.sample_count,
                 static_cast<double>(decision.interval) / static_cast<double>(interval));
  }
  if (thinned.sample_count > 0) thinned.weight = SampleWeight(size, interval);
  return thinned;
}

uint64_t SampleThinner::Binomial(uint64_t n, double p) {
  uint64_t k = 0;
  if (n <= 16) {
    for (uint64_t i = 0; i < n; ++i) k += random_.NextOpenClosed() <= p ? 1 : 0;
    return k;
  }
  // The gaps between successes are Geometric(p): 1 + floor(log U / log(1-p)).
  const double log_q = std::log1p(-p);
  for (double at = 0;;) {
    at += 1 + std::floor(std::log(random_.NextOpenClosed()) / log_q);
    if (at > static_cast<double>(n)) return k;
    ++k;
  }
}

double SampleWeight(size_t size, int32_t interval) {
  const double s = static_cast<double>(size);
  if (interval <= 0) return s;
  // size / (1 - exp(-size/interval)), with expm1 for small size/interval.
  return s / -std::expm1(-s / static_cast<double>(interval));
}

void ThreadSampler::Seed(uint64_t vm_seed, uint64_t thread_index) {
  random_ = ThreadRandom(vm_seed, thread_index, kSamplerStream);
}

void ThreadSampler::Configure(bool enabled, int32_t interval, const Tlab& tlab) {
  enabled_ = enabled;
  interval_ = interval;
  anchor_top_ = tlab.top;
  r_ = (enabled && interval > 0) ? random_.NextExponential(interval) : 0;
}

void ThreadSampler::Sync(const Tlab& tlab) {
  // Disabled or suspended, nothing is charged: r is redrawn when sampling is
  // enabled again (Configure), and kept across a callback (.suspend).
  if (enabled() && anchor_top_ != 0) {
    MINIVM_GC_DCHECK(tlab.top >= anchor_top_, "TLAB top %d moved below the sampler's anchor %d",
                     tlab.top, anchor_top_);
    r_ -= static_cast<double>(tlab.top - anchor_top_);
    // Arm() set current_end <= anchor + floor(r), and the fast path never
    // moves top past current_end, so r stays >= 0.
    MINIVM_GC_DCHECK(r_ >= 0, "the fast path allocated past the sample point (r = %f)", r_);
  }
  anchor_top_ = tlab.top;
}

void ThreadSampler::Reconfigure(bool enabled, int32_t interval, Tlab& tlab) {
  Sync(tlab);
  Configure(enabled, interval, tlab);
  Arm(tlab);
}

void ThreadSampler::OnTlabRetired(const Tlab& tlab) {
  Sync(tlab);
  anchor_top_ = 0;
}

SampleDecision ThreadSampler::Account(size_t size, const Tlab& tlab) {
  SampleDecision d;
  anchor_top_ = tlab.top;
  if (!enabled()) return d;
  const double s = static_cast<double>(size);
  if (interval_ == 0) {
    d.sample_count = 1;
    d.interval = 0;
    d.weight = s;
    return d;
  }
  if (s <= r_) {
    r_ -= s;
    return d;
  }
  // The first point lies r_ bytes into the object; count the rest in the
  // remaining s - r_ bytes, then start a fresh gap at the object's end.
  const double interval = static_cast<double>(interval_);
  d.sample_count = 1 + random_.NextPoisson((s - r_) / interval);
  d.interval = interval_;
  d.weight = SampleWeight(size, interval_);
  r_ = random_.NextExponential(interval);
  return d;
}

void ThreadSampler::Arm(Tlab& tlab) const {
  if (!enabled() || tlab.end == 0) {
    tlab.current_end = tlab.end;
    return;
  }
  // An object of size s contains the next point iff s > floor(r_) (.arm);
  // r_ is bounded (a few dozen intervals), so this cannot overflow.
  const uintptr_t distance = static_cast<uintptr_t>(std::floor(r_));
  tlab.current_end = std::min(tlab.end, tlab.top + distance);
}

void ThreadSampler::Resume(const Tlab& tlab) {
  if (suspended_ > 0) --suspended_;
  // Bytes allocated while suspended are not charged.
  anchor_top_ = tlab.top;
}

ThreadSampler::SlowPathScope::~SlowPathScope() {
  sampler_.Arm(tlab_);
  MINIVM_GC_DCHECK(
      tlab_.start <= tlab_.top && tlab_.top <= tlab_.current_end && tlab_.current_end <= tlab_.end,
      "TLAB invariant broken at the end of a slow path");
}

SampleDecision ThreadSampler::SlowPathScope::Account(size_t size) {
  MINIVM_GC_DCHECK(!accounted_, "two allocations accounted in one slow path");
  accounted_ = true;
  return sampler_.Account(size, tlab_);
}

}  // namespace minivm::gc
