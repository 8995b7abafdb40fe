// The heap sampler: which allocations are reported to agents, decided per
// thread as a Poisson process over the bytes that thread allocates.
//
// Design
// ------
// .process  Sample points fall on each thread's stream of allocated bytes as
//   a Poisson process with mean gap `interval` bytes: gaps are
//   Exponential(interval), continuous. An object occupying bytes [a, a+s) of
//   the stream is sampled when one or more points fall inside it; it then
//   carries n = the number of points inside (statmemprof's n_samples). So
//   P(sampled) = 1 - exp(-s/I), E[n] = s/I, and an object's Horvitz-Thompson
//   weight s / (1 - exp(-s/I)) is an unbiased estimate of the bytes it
//   stands for. Interval 0 samples every allocation with n = 1, weight = s.
//
// .arm  Integer boundaries make the TLAB test exact. The distance r (a
//   double) from the current position to the next point decides everything:
//   an object of integer size s contains the point iff s > r iff
//   s > floor(r). So setting the TLAB's current_end to
//   min(end, top + floor(r)) makes the unchanged fast path
//   (top + s > current_end ?) fall into the slow path exactly when a sample
//   is due, and never otherwise (except at the real end of the TLAB).
//
// .anchor  One source of truth (the JDK-8356372 lesson). The state is the
//   pair (anchor_top, r): r is the distance to the next point measured from
//   the TLAB address anchor_top. The fast path moves top without telling
//   us, so every slow path first syncs: it charges top - anchor_top to r
//   and re-anchors at top. Retiring a TLAB syncs and drops the anchor
//   (OnTlabRetired). A new TLAB needs no call of its own: the slow path
//   places the object in it and accounting charges exactly that object and
//   anchors at the new top, its end. So bytes that never hold an object
//   (the retired TLAB's tail) are never charged. Allocations outside any
//   TLAB (large objects, objects bigger than the TLAB) are accounted like
//   any other, so there is no second counter to get out of step. Arming
//   keeps current_end <= anchor_top + floor(r), so a sync never takes r
//   below 0 (a debug check says so).
//
// .scopes  The protocol is two scoped operations, and its steps (Sync,
//   Account, Arm, Suspend, Resume, Configure) are private to ThreadSampler:
//   - ThreadSampler::SlowPathScope is the sampler's part of one slow path.
//     Its constructor syncs, so nothing is accounted against a stale
//     anchor; its Account() is the only way to charge an allocation, at
//     most once (a debug check); its destructor arms, on every exit of the
//     slow path, the failing ones included.
//   - ThreadSampler::SuspensionScope brackets an agent callback (.suspend):
//     it suspends, and on destruction resumes and arms, exactly once.
//   The two complete operations with no interior, Reconfigure (sync,
//   configure, arm: .rearm) and OnTlabRetired (sync, drop the anchor), are
//   single public calls. So accounting without a sync, leaving a slow path
//   unarmed, resuming what was not suspended or twice, and suspending
//   without resuming do not compile; only a second Account() in one scope
//   is left to the debug check. The scopes cannot be copied, moved or
//   allocated with new, so they end where their block ends, and one made
//   as a temporary (destroyed at once) is refused: their constructors are
//   [[nodiscard]], an error under -Werror.
//   Rejected: a state machine checked at run time (a state field asserted
//   by each step) finds a misordered call only on the path a test happens
//   to run, and costs a field and a branch per step in release builds if
//   it is to find it there; the scopes cost nothing and reject the misuse
//   when it is written. Public steps with their order stated in a
//   comment: every exit of the slow path would have to remember to arm.
//
// .memoryless  When a point falls inside an object, the points after the
//   first one within the object are counted with a Poisson draw and the
//   next gap starts fresh at the object's end. Both steps are exact for a
//   Poisson process, and the generator is consulted only when a sample
//   happens, never on TLAB refills. Hence the sampled objects depend only on
//   the sequence of object sizes and the seed, not on TLAB sizes, refills,
//   or in-versus-outside-TLAB placement; tests check this exactly.
//
// .first-gap  No first-allocation bias (JDK-8247615). A thread's state
//   starts with a real draw, r ~ Exp(I), like every later gap; nothing is
//   "due" at birth.
//
// .rearm  Enabling sampling or changing the interval redraws r for every
//   thread (legal, by .memoryless) and re-arms its TLAB at a safepoint, so
//   the change takes effect at each thread's next allocation, not when its
//   TLAB happens to run out (the JDK-8264411 lesson). ThreadSampler::
//   Reconfigure does it in one call; the heap makes that call at thread
//   attach and at every Heap::ReconfigureSampling.
//
// .suspend  While a thread runs an agent callback its sampler is suspended:
//   allocations are neither sampled nor charged, and r is kept, so callbacks
//   cannot recurse into the sampler or shift the sample sequence of the
//   program. Suspensions nest; sampling resumes when the outermost ends.
//
// .thin  One process, several intervals. Observers may each want their own
//   interval (VMTI: one per environment). The sampler runs one process, at
//   the finest interval I0 any observer wants of that thread, and each
//   observer at a coarser interval I keeps each point of it with
//   probability I0/I, independently: the kept points are a Poisson process
//   at I (thinning), so an object's count for that observer is
//   Binomial(n, I0/I) of its n points, and Poisson(s/I) overall. At I0 = 0
//   (every allocation, one "point" each) the observer's count is drawn
//   directly, Poisson(s/I): the number of points its own process puts in
//   the object. A thinned decision carries the observer's interval and the
//   weight at that interval, so every observer's estimates are unbiased on
//   their own. An observer wanting a finer interval than the decision's
//   (it lowered its interval and this thread has not yet been re-armed)
//   gets the decision unchanged: it cannot be refined, and its own
//   interval and weight keep the estimate unbiased. SampleThinner draws
//   from a generator of its own per thread (seeded like the sampler's, on
//   another stream), so how many observers there are never shifts the
//   sampler's sequence.
//   Rejected: one independent process per observer (as many armed points
//   and slow paths as observers, and the cost of each at its own
//   interval, where thinning costs the finest one's alone); a VM-wide
//   interval, the last setting winning (HotSpot's: two tools that want
//   different precision cannot both have it).
//
// .random  Each thread owns a xoshiro256++ generator (base/xoshiro.h, shared
//   with rand()) seeded with splitmix64 from (--seed, thread index): no
//   shared state, no locks, reproducible runs. Abseil's generators are not
//   used because they do not promise stable sequences across releases, and
//   determinism is part of the contract. Exponential draws use -log(U) with
//   53-bit U in (0, 1].
//
// Rejected alternatives: a per-thread countdown decremented by the fast path
// (costs the fast path; HotSpot's design, and ours, cost nothing when off);
// Bernoulli-per-word (geometric) gaps (equivalent in the limit, but the
// contract's weight formula is the continuous one); carrying a sample's
// overshoot into the next gap (biased unless done exactly, and unnecessary
// given .memoryless).
#ifndef MINIVM_GC_SAMPLER_H_
#define MINIVM_GC_SAMPLER_H_

#include <cstddef>
#include <cstdint>

#include "gc/tlab.h"
#include "base/xoshiro.h"

namespace minivm::gc {

inline constexpr int32_t kDefaultSamplingInterval = 512 * 1024;

// The sampler's draws, from xoshiro256++ (base/xoshiro.h), one per thread.
class SamplerRandom {
 public:
  explicit SamplerRandom(uint64_t seed = 0) : xoshiro_(seed) {}
  uint64_t Next() { return xoshiro_.NextPlusPlus(); }
  // Uniform in (0, 1], 53 bits.
  double NextOpenClosed();
  // Exponential with the given mean.
  double NextExponential(double mean);
  // Poisson with the given mean (exact: gap counting below 16, then
  // the PTRS transformed-rejection method).
  uint64_t NextPoisson(double mean);

 private:
  base::Xoshiro256 xoshiro_;
};

// What the sampler says about one allocation that a sample point hit.
struct SampleDecision {
  uint64_t sample_count = 0;  // points inside the object; 0 = not sampled
  int32_t interval = 0;       // the mean interval the points were drawn with
  double weight = 0;          // Horvitz-Thompson bytes this sample stands for
};

// Horvitz-Thompson weight of a sampled object: size / P(sampled).
double SampleWeight(size_t size, int32_t interval);

// The decisions of coarser processes drawn from one sample (.thin); one per
// thread, used by that thread only.
class SampleThinner {
 public:
  // Seeds the generator; call once when the thread attaches.
  void Seed(uint64_t vm_seed, uint64_t thread_index);
  // The decision at `interval` for the object of `size` bytes that
  // `decision` sampled: sample_count 0 if that process has no point in it.
  // Unchanged if `interval` is not coarser than decision.interval.
  SampleDecision Thin(const SampleDecision& decision, size_t size, int32_t interval);

 private:
  // Binomial(n, p), 0 < p < 1: Bernoulli trials for small n, else
  // geometric skips (O(n p) draws).
  uint64_t Binomial(uint64_t n, double p);

  SamplerRandom random_;
};

// Per-thread sampler state. Owned by the heap's per-mutator data; every
// method is called by the owning thread, or by the GC while the owner
// is stopped at a safepoint.
//
// The steps of the protocol are private: the heap drives them through the
// two scopes below and the two complete calls, Reconfigure and
// OnTlabRetired (.scopes).
class ThreadSampler {
 public:
  class SlowPathScope;
  class SuspensionScope;

  ThreadSampler() = default;

  // Seeds the generator; call once when the thread attaches.
  void Seed(uint64_t vm_seed, uint64_t thread_index);

  // Turns sampling on (drawing a fresh gap) or off, with the given interval,
  // and re-arms the TLAB (.rearm): charges what the fast path allocated
  // since the last anchor, reconfigures, arms. At attach and at safepoints.
  void Reconfigure(bool enabled, int32_t interval, Tlab& tlab);

  // The TLAB is being retired: charges what the fast path allocated in it
  // and drops the anchor. A new TLAB needs no call: the slow path's
  // Account() anchors in it (.anchor).
  void OnTlabRetired(const Tlab& tlab);

  bool enabled() const { return enabled_ && suspended_ == 0; }
  int32_t interval() const { return interval_; }

  // Distance to the next sample point from the anchor; for tests.
  double bytes_until_sample() const { return r_; }

 private:
  void Configure(bool enabled, int32_t interval, const Tlab& tlab);
  // Charges the bytes the fast path allocated since the last anchor.
  void Sync(const Tlab& tlab);
  // Charges one allocation of `size` bytes that the slow path placed (in the
  // TLAB, after bumping top, or outside it), decides whether it is sampled,
  // and anchors at tlab.top.
  SampleDecision Account(size_t size, const Tlab& tlab);
  // Sets tlab.current_end for the next sample point (or to end when off).
  void Arm(Tlab& tlab) const;
  // Nestable (.suspend).
  void Suspend() { ++suspended_; }
  void Resume(const Tlab& tlab);

  bool enabled_ = false;
  int suspended_ = 0;
  int32_t interval_ = kDefaultSamplingInterval;
  double r_ = 0;             // bytes from anchor_top_ to the next point
  uintptr_t anchor_top_ = 0;  // 0: no TLAB anchor
  SamplerRandom random_;
};

// The sampler's part of one allocation slow path (.scopes): the constructor
// syncs, Account() is the only way to charge an allocation, the destructor
// arms the TLAB, on every exit, the failing ones included. Open it before
// anything moves the TLAB and close it before any callback runs.
class [[nodiscard]] ThreadSampler::SlowPathScope {
 public:
  [[nodiscard]] SlowPathScope(ThreadSampler& sampler, Tlab& tlab) : sampler_(sampler), tlab_(tlab) {
    sampler_.Sync(tlab_);
  }
  ~SlowPathScope();
  SlowPathScope(const SlowPathScope&) = delete;
  SlowPathScope& operator=(const SlowPathScope&) = delete;
  static void* operator new(size_t) = delete;

  // Charges the object of `size` bytes the slow path placed (the TLAB's top
  // already bumped past it when it is in the TLAB) and says whether it is
  // sampled. At most once per scope (debug check): one slow path, one object.
  SampleDecision Account(size_t size);

 private:
  ThreadSampler& sampler_;
  Tlab& tlab_;
  bool accounted_ = false;
};

// Brackets an agent callback (.suspend): the constructor suspends the
// sampler, the destructor resumes it and re-arms the TLAB, exactly once per
// scope. Scopes nest; sampling resumes when the outermost one closes.
class [[nodiscard]] ThreadSampler::SuspensionScope {
 public:
  [[nodiscard]] SuspensionScope(ThreadSampler& sampler, Tlab& tlab)
      : sampler_(sampler), tlab_(tlab) {
    sampler_.Suspend();
  }
  ~SuspensionScope() {
    sampler_.Resume(tlab_);
    sampler_.Arm(tlab_);
  }
  SuspensionScope(const SuspensionScope&) = delete;
  SuspensionScope& operator=(const SuspensionScope&) = delete;
  static void* operator new(size_t) = delete;

 private:
  ThreadSampler& sampler_;
  Tlab& tlab_;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_SAMPLER_H_
