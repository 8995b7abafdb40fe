// Unit tests of the heap sampler against a mocked heap: a thread allocating
// from TLABs over a fake address range, driving the sampler through the same
// scopes as the real heap (gc/sampler.h .scopes).
//
// Statistical checks use 5.7 standard deviations (two-sided p ~ 1.2e-8 each)
// or chi-square critical values at p = 1e-8, so the whole suite (< 80 such
// checks) fails falsely less than once in a million runs. Seeds are fixed and
// printed on failure.
#include "gc/sampler.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace minivm::gc {
namespace {

constexpr double kSigmas = 5.7;

// Chi-square critical values at p = 1e-8 by degrees of freedom.
double ChiSquareCritical(int df) {
  switch (df) {
    case 1:
      return 32.84;
    case 2:
      return 36.84;
    case 3:
      return 40.15;
    case 4:
      return 43.07;
    case 5:
      return 45.76;
    case 6:
      return 48.29;
    case 7:
      return 50.69;
    case 8:
      return 53.00;
    case 9:
      return 55.45;
    case 19:
      return 75.73;
    default:
      return -1;
  }
}

// One mocked thread: TLABs of tlab_size carved from a fake address range
// (never dereferenced), objects >= large_threshold allocated outside them.
class MockThread {
 public:
  MockThread(size_t tlab_size, size_t large_threshold, uint64_t seed, uint64_t thread_index = 0)
      : tlab_size_(tlab_size), large_threshold_(large_threshold) {
    sampler_.Seed(seed, thread_index);
  }

  void Configure(bool enabled, int32_t interval) { sampler_.Reconfigure(enabled, interval, tlab_); }

  // The allocation entry point: inline fast path, then the slow path.
  SampleDecision Allocate(size_t size) {
    if (size < large_threshold_ && tlab_.top + size <= tlab_.current_end) {
      tlab_.top += size;
      ++fast_paths_;
      return {};
    }
    ++slow_paths_;
    SampleDecision d;
    {
      ThreadSampler::SlowPathScope scope(sampler_, tlab_);
      if (size >= large_threshold_ || size > tlab_size_) {
        d = scope.Account(size);  // outside the TLAB
      } else {
        if (tlab_.top + size > tlab_.end) {
          sampler_.OnTlabRetired(tlab_);
          cursor_ += tlab_size_ + 4096;  // leave a hole: addresses need not be contiguous
          tlab_.start = tlab_.top = cursor_;
          tlab_.end = tlab_.current_end = cursor_ + tlab_size_;
        }
        tlab_.top += size;
        d = scope.Account(size);
      }
    }  // armed here
    EXPECT_LE(tlab_.top, tlab_.current_end);
    EXPECT_LE(tlab_.current_end, tlab_.end);
    return d;
  }

  ThreadSampler& sampler() { return sampler_; }
  Tlab& tlab() { return tlab_; }
  uint64_t slow_paths() const { return slow_paths_; }

 private:
  size_t tlab_size_;
  size_t large_threshold_;
  uintptr_t cursor_ = 1 << 20;
  Tlab tlab_;
  ThreadSampler sampler_;
  uint64_t fast_paths_ = 0;
  uint64_t slow_paths_ = 0;
};

struct Sampled {
  uint64_t index;
  uint64_t count;
  bool operator==(const Sampled& o) const { return index == o.index && count == o.count; }
};

std::vector<size_t> MixedSizes(uint64_t n, uint64_t seed) {
  SamplerRandom r(seed);
  std::vector<size_t> sizes;
  sizes.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t k = r.Next() % 100;
    if (k < 60)
      sizes.push_back(16 + 8 * (r.Next() % 4));
    else if (k < 90)
      sizes.push_back(24 + 8 * (r.Next() % 64));
    else if (k < 99)
      sizes.push_back(1024 + 8 * (r.Next() % 512));
    else
      sizes.push_back(32 * 1024 + 8 * (r.Next() % 16384));
  }
  return sizes;
}

std::vector<Sampled> RunAll(MockThread& t, const std::vector<size_t>& sizes) {
  std::vector<Sampled> out;
  for (uint64_t i = 0; i < sizes.size(); ++i) {
    const SampleDecision d = t.Allocate(sizes[i]);
    if (d.sample_count > 0) out.push_back({i, d.sample_count});
  }
  return out;
}

TEST(SamplerTest, DisabledNeverSamplesAndKeepsCurrentEndAtEnd) {
  MockThread t(4096, 1 << 20, 1);
  for (int i = 0; i < 100000; ++i) {
    EXPECT_EQ(t.Allocate(32).sample_count, 0u);
    ASSERT_EQ(t.tlab().current_end, t.tlab().end);
  }
  // Only refills took the slow path: 4096 / 32 = 128 objects per TLAB.
  EXPECT_EQ(t.slow_paths(), 100000u / 128 + (100000 % 128 ? 1 : 0));
}

TEST(SamplerTest, IntervalZeroSamplesEveryAllocationExactly) {
  MockThread t(4096, 2048, 7);
  t.Configure(true, 0);
  const std::vector<size_t> sizes = MixedSizes(20000, 3);
  for (size_t s : sizes) {
    const SampleDecision d = t.Allocate(s);
    ASSERT_EQ(d.sample_count, 1u);
    EXPECT_EQ(d.interval, 0);
    EXPECT_EQ(d.weight, static_cast<double>(s));
  }
}

TEST(SamplerTest, TlabSizeAndPlacementNeverChangeWhatIsSampled) {
  const uint64_t seed = 42;
  const std::vector<size_t> sizes = MixedSizes(200000, seed);
  std::vector<Sampled> reference;
  bool first = true;
  for (size_t tlab : {size_t{512}, size_t{4096}, size_t{64 << 10}, size_t{1 << 20}}) {
    for (size_t large : {size_t{1024}, size_t{16 << 10}, size_t{1 << 30}}) {
      MockThread t(tlab, large, seed);
      t.Configure(true, 4096);
      const std::vector<Sampled> got = RunAll(t, sizes);
      if (first) {
        reference = got;
        first = false;
        ASSERT_GT(reference.size(), 1000u);
      } else {
        ASSERT_EQ(got, reference) << "seed " << seed << " tlab " << tlab << " large " << large;
      }
    }
  }
}

TEST(SamplerTest, FirstDrawIsARealGap) {
  // JDK-8247615: a thread's first allocation must not be special. 20000
  // threads each allocate one 32-byte object at a 1 MiB interval: the number
  // sampled is Binomial(20000, 1 - exp(-32/2^20)), mean 0.61; P(>= 12) < 1e-12.
  int sampled = 0;
  for (uint64_t thread = 0; thread < 20000; ++thread) {
    MockThread t(4096, 1 << 20, 5, thread);
    t.Configure(true, 1 << 20);
    if (t.Allocate(32).sample_count > 0) ++sampled;
  }
  EXPECT_LT(sampled, 12) << "seed 5";
}

TEST(SamplerTest, TotalSamplePointsMatchBytesOverInterval) {
  // Sum of n over all objects ~ Poisson(B / I).
  for (int32_t interval : {64, 1024, 32 * 1024}) {
    const uint64_t seed = 1000 + interval;
    MockThread t(8192, 4096, seed);
    t.Configure(true, interval);
    const std::vector<size_t> sizes = MixedSizes(300000, seed);
    double bytes = 0;
    uint64_t points = 0;
    for (size_t s : sizes) {
      bytes += s;
      points += t.Allocate(s).sample_count;
    }
    const double mean = bytes / interval;
    EXPECT_LE(std::fabs(points - mean), kSigmas * std::sqrt(mean))
        << "seed " << seed << " interval " << interval << " points " << points << " expected "
        << mean;
  }
}

TEST(SamplerTest, PerSizeSamplingProbabilityIsOneMinusExp) {
  // Interleaved sizes, each sampled with probability 1 - exp(-s/I): one
  // chi-square over the sizes (df = number of sizes).
  const uint64_t seed = 99;
  const int32_t interval = 2048;
  const size_t sizes[] = {16, 24, 48, 128, 512, 1400, 4096, 6000};
  const int k = sizeof(sizes) / sizeof(sizes[0]);
  MockThread t(4096, 8192, seed);
  t.Configure(true, interval);
  SamplerRandom order(seed);
  std::vector<uint64_t> allocated(k), sampled(k);
  for (int i = 0; i < 400000; ++i) {
    const int j = order.Next() % k;
    ++allocated[j];
    if (t.Allocate(sizes[j]).sample_count > 0) ++sampled[j];
  }
  double chi2 = 0;
  for (int j = 0; j < k; ++j) {
    const double p = -std::expm1(-static_cast<double>(sizes[j]) / interval);
    const double e = allocated[j] * p;
    ASSERT_GT(e * (1 - p), 100) << "too few expected samples for size " << sizes[j];
    chi2 += (sampled[j] - e) * (sampled[j] - e) / (e * (1 - p));
  }
  EXPECT_LE(chi2, ChiSquareCritical(8)) << "seed " << seed;
}

TEST(SamplerTest, SampleCountOfLargeObjectsIsTruncatedPoisson) {
  // An object of s bytes holds Poisson(s/I) points; given it is sampled, the
  // count is zero-truncated Poisson. Histogram vs pmf, bins pooled >= 100.
  const uint64_t seed = 123;
  const int32_t interval = 1000;
  const size_t size = 8000;  // mean 8 points
  MockThread t(1 << 20, 1 << 30, seed);
  t.Configure(true, interval);
  const double mu = static_cast<double>(size) / interval;
  std::vector<uint64_t> hist(64);
  uint64_t n_sampled = 0;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t c = t.Allocate(size).sample_count;
    if (c == 0) continue;
    ++n_sampled;
    ++hist[std::min<uint64_t>(c, 63)];
  }
  const double trunc = -std::expm1(-mu);
  std::vector<double> expected(64);
  double pk = std::exp(-mu);
  for (int c = 1; c < 63; ++c) {
    pk *= mu / c;
    expected[c] = n_sampled * pk / trunc;
  }
  // Pool into bins with >= 100 expected.
  double chi2 = 0;
  int bins = 0;
  double e_acc = 0, o_acc = 0;
  for (int c = 1; c < 64; ++c) {
    e_acc += expected[c];
    o_acc += hist[c];
    if (e_acc >= 100 && c < 62) {
      chi2 += (o_acc - e_acc) * (o_acc - e_acc) / e_acc;
      ++bins;
      e_acc = o_acc = 0;
    }
  }
  if (e_acc > 0) {
    chi2 += (o_acc - e_acc) * (o_acc - e_acc) / std::max(e_acc, 1.0);
    ++bins;
  }
  ASSERT_GE(bins, 5);
  ASSERT_LE(bins, 20);
  const int df = bins - 1;
  const double crit = ChiSquareCritical(df) > 0 ? ChiSquareCritical(df) : ChiSquareCritical(19);
  EXPECT_LE(chi2, crit) << "seed " << seed << " bins " << bins;
}

TEST(SamplerTest, GapsBetweenSampledBytesAreGeometric) {
  // With 1-byte objects every byte is sampled independently with probability
  // q = 1 - exp(-1/I): gaps between sampled bytes are Geometric(q). Chi-square
  // on 20 roughly equiprobable bins.
  const uint64_t seed = 77;
  const int32_t interval = 200;
  MockThread t(1 << 16, 1 << 30, seed);
  t.Configure(true, interval);
  const double q = -std::expm1(-1.0 / interval);
  std::vector<uint64_t> gaps;
  uint64_t last = 0;
  for (uint64_t i = 1; gaps.size() < 200000; ++i) {
    if (t.Allocate(1).sample_count > 0) {
      if (last != 0) gaps.push_back(i - last);
      last = i;
    }
  }
  // Bin edges: P(gap > g) = (1-q)^(g-1). Choose integer edges near quantiles.
  std::vector<uint64_t> edges;  // bin j holds gaps in [edges[j], edges[j+1])
  edges.push_back(1);
  for (int j = 1; j < 20; ++j) {
    const double g = 1 + std::log(1 - j / 20.0) / std::log1p(-q);
    edges.push_back(static_cast<uint64_t>(std::ceil(g)));
  }
  edges.push_back(UINT64_MAX);
  std::vector<uint64_t> obs(20);
  for (uint64_t g : gaps) {
    int j = 19;
    while (g < edges[j]) --j;
    ++obs[j];
  }
  double chi2 = 0;
  for (int j = 0; j < 20; ++j) {
    const double p_lo = std::pow(1 - q, static_cast<double>(edges[j] - 1));
    const double p_hi = j == 19 ? 0 : std::pow(1 - q, static_cast<double>(edges[j + 1] - 1));
    const double e = gaps.size() * (p_lo - p_hi);
    chi2 += (obs[j] - e) * (obs[j] - e) / e;
  }
  EXPECT_LE(chi2, ChiSquareCritical(19)) << "seed " << seed;
}

TEST(SamplerTest, HorvitzThompsonEstimateIsUnbiasedForMixedSizesAtOneSite) {
  // jemalloc's pathological mix: many tiny objects plus a few huge ones at
  // one site. The HT estimate of the site's bytes must be within 5.7 sigma of
  // the truth, where sigma^2 = sum s^2 (1 - p) / p over all objects.
  for (uint64_t seed : {11u, 12u}) {
    const int32_t interval = 64 * 1024;
    MockThread t(8192, 16384, seed);
    t.Configure(true, interval);
    double truth = 0, estimate = 0, variance = 0;
    for (int round = 0; round < 40; ++round) {
      for (int i = 0; i < 20000; ++i) {
        const size_t s = 16;
        truth += s;
        const SampleDecision d = t.Allocate(s);
        if (d.sample_count) estimate += d.weight;
        const double p = -std::expm1(-static_cast<double>(s) / interval);
        variance += s * s * (1 - p) / p;
      }
      const size_t big = 1 << 20;
      truth += big;
      const SampleDecision d = t.Allocate(big);
      if (d.sample_count) estimate += d.weight;
      const double p = -std::expm1(-static_cast<double>(big) / interval);
      variance += static_cast<double>(big) * big * (1 - p) / p;
    }
    EXPECT_LE(std::fabs(estimate - truth), kSigmas * std::sqrt(variance))
        << "seed " << seed << " truth " << truth << " estimate " << estimate;
  }
}

TEST(SamplerTest, SuspendedAllocationsDoNotDisturbTheSequence) {
  const uint64_t seed = 31;
  const std::vector<size_t> sizes = MixedSizes(50000, seed);
  MockThread plain(4096, 8192, seed);
  plain.Configure(true, 2048);
  const std::vector<Sampled> reference = RunAll(plain, sizes);

  MockThread t(4096, 8192, seed);
  t.Configure(true, 2048);
  std::vector<Sampled> got;
  for (uint64_t i = 0; i < sizes.size(); ++i) {
    const SampleDecision d = t.Allocate(sizes[i]);
    if (d.sample_count > 0) {
      got.push_back({i, d.sample_count});
      // A "callback" that allocates while suspended.
      ThreadSampler::SuspensionScope suspended(t.sampler(), t.tlab());
      for (int k = 0; k < 5; ++k) {
        EXPECT_EQ(t.Allocate(100 + 1000 * k).sample_count, 0u);
      }
    }
  }
  EXPECT_EQ(got, reference) << "seed " << seed;
}

TEST(SamplerTest, SameSeedSameSamplesAndThreadsDiffer) {
  const std::vector<size_t> sizes = MixedSizes(50000, 5);
  MockThread a(4096, 8192, 9, 1), b(4096, 8192, 9, 1), c(4096, 8192, 9, 2);
  for (MockThread* t : {&a, &b, &c}) t->Configure(true, 1024);
  const auto ra = RunAll(a, sizes), rb = RunAll(b, sizes), rc = RunAll(c, sizes);
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(SamplerTest, IntervalChangeTakesEffectAtTheNextAllocation) {
  const uint64_t seed = 2024;
  MockThread t(1 << 20, 1 << 30, seed);
  t.Configure(true, 1 << 20);
  for (int i = 0; i < 10; ++i) t.Allocate(64);
  // Switch to interval 0: the very next allocation is sampled, even though the
  // TLAB has plenty of room left.
  t.Configure(true, 0);
  EXPECT_EQ(t.Allocate(64).sample_count, 1u);
  // Then to 256 bytes: statistics follow the new interval.
  t.Configure(true, 256);
  uint64_t points = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) points += t.Allocate(32).sample_count;
  const double mean = 32.0 * n / 256;
  EXPECT_LE(std::fabs(points - mean), kSigmas * std::sqrt(mean)) << "seed " << seed;
  // And off: nothing more, and current_end is back at end.
  t.Configure(false, 256);
  EXPECT_EQ(t.tlab().current_end, t.tlab().end);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(t.Allocate(32).sample_count, 0u);
}

// gc/sampler.h .anchor: arming keeps the fast path from passing the sample
// point, so a sync never takes r below zero; a heap bug that let it would be caught
// in debug builds, not hidden by clamping r.
TEST(SamplerDeathTest, SyncPastTheSamplePointFailsTheDebugCheck) {
  ThreadSampler sampler;
  sampler.Seed(7, 0);
  Tlab tlab;
  tlab.start = tlab.top = uintptr_t{1} << 20;
  tlab.end = tlab.current_end = tlab.start + (uintptr_t{1} << 20);
  sampler.Reconfigure(true, 4096, tlab);
  ASSERT_LT(tlab.current_end + 8, tlab.end);
  tlab.top = tlab.current_end + 8;  // what no fast path may do
  EXPECT_DEBUG_DEATH({ ThreadSampler::SlowPathScope scope(sampler, tlab); },
                     "past the sample point");
}

TEST(SamplerRandomTest, PoissonMeanAndVarianceForLargeMeans) {
  for (double mean : {3.5, 20.0, 250.0}) {
    SamplerRandom r(17);
    const int n = 200000;
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n; ++i) {
      const double k = static_cast<double>(r.NextPoisson(mean));
      sum += k;
      sum2 += k * k;
    }
    const double m = sum / n;
    EXPECT_LE(std::fabs(m - mean), kSigmas * std::sqrt(mean / n)) << "seed 17 mean " << mean;
    const double var = sum2 / n - m * m;
    // Var of the sample variance of a Poisson ~ (mu + 2 mu^2) / n.
    EXPECT_LE(std::fabs(var - mean), kSigmas * std::sqrt((mean + 2 * mean * mean) / n))
        << "seed 17 mean " << mean;
  }
}

TEST(SampleThinnerTest, AnIntervalNotCoarserLeavesTheDecisionAsItIs) {
  // .thin: a process cannot be refined, only thinned.
  SampleThinner thinner;
  thinner.Seed(7, 0);
  const SampleDecision d{3, 4096, SampleWeight(100, 4096)};
  for (int32_t interval : {0, 1024, 4096}) {
    const SampleDecision t = thinner.Thin(d, 100, interval);
    EXPECT_EQ(t.sample_count, 3u);
    EXPECT_EQ(t.interval, 4096);
    EXPECT_EQ(t.weight, d.weight);
  }
}

TEST(SampleThinnerTest, ThinnedDecisionsArePoissonAtTheCoarserInterval) {
  // A thread sampling at `base`, thinned to `interval`: for the thinned
  // decisions, the total of the points ~ Poisson(bytes / interval), and
  // each size is sampled with probability 1 - exp(-s / interval) (one
  // chi-square over the sizes). Each thinned decision carries its interval
  // and the weight at it. Base 0 draws Poisson counts; n > 16 points (the
  // largest size at base 64) take the geometric skips.
  struct Case {
    int32_t base, interval;
  };
  for (const Case c : {Case{0, 4096}, Case{1024, 4096}, Case{64, 65536}, Case{4096, 65536}}) {
    const uint64_t seed = 300 + static_cast<uint64_t>(c.base);
    MockThread t(8192, 8192, seed);
    t.Configure(true, c.base);
    SampleThinner thinner;
    thinner.Seed(seed, 1);
    const size_t sizes[] = {static_cast<size_t>(c.interval) / 256, static_cast<size_t>(c.interval) / 16,
                            static_cast<size_t>(c.interval) / 2, static_cast<size_t>(c.interval) * 2};
    constexpr int k = 4;
    SamplerRandom order(seed);
    std::vector<uint64_t> allocated(k), sampled(k);
    double bytes = 0;
    uint64_t points = 0;
    for (int i = 0; i < 200000; ++i) {
      const int j = static_cast<int>(order.Next() % k);
      ++allocated[j];
      bytes += static_cast<double>(sizes[j]);
      const SampleDecision d = t.Allocate(sizes[j]);
      if (d.sample_count == 0) continue;
      const SampleDecision thinned = thinner.Thin(d, sizes[j], c.interval);
      if (thinned.sample_count == 0) continue;
      ++sampled[j];
      points += thinned.sample_count;
      ASSERT_EQ(thinned.interval, c.interval);
      ASSERT_EQ(thinned.weight, SampleWeight(sizes[j], c.interval));
    }
    const double mean = bytes / c.interval;
    EXPECT_LE(std::fabs(static_cast<double>(points) - mean), kSigmas * std::sqrt(mean))
        << "seed " << seed << " base " << c.base << " interval " << c.interval;
    double chi2 = 0;
    for (int j = 0; j < k; ++j) {
      const double p = -std::expm1(-static_cast<double>(sizes[j]) / c.interval);
      const double e = static_cast<double>(allocated[j]) * p;
      ASSERT_GT(e * (1 - p), 100) << "too few expected samples for size " << sizes[j];
      chi2 += (static_cast<double>(sampled[j]) - e) * (static_cast<double>(sampled[j]) - e) /
              (e * (1 - p));
    }
    EXPECT_LE(chi2, ChiSquareCritical(k)) << "seed " << seed << " base " << c.base;
  }
}

TEST(SampleWeightTest, MatchesTheContractFormula) {
  EXPECT_DOUBLE_EQ(SampleWeight(100, 0), 100);
  EXPECT_NEAR(SampleWeight(1 << 20, 512 * 1024), (1 << 20) / (1 - std::exp(-2.0)), 1e-6);
  // Tiny objects weigh about the interval.
  EXPECT_NEAR(SampleWeight(16, 512 * 1024), 512 * 1024 + 8, 1);
}

}  // namespace
}  // namespace minivm::gc
