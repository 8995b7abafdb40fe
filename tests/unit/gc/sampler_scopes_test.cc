// Unit tests of the sampler's two scopes (gc/sampler.h .scopes) on a TLAB
// over a fake address range (never dereferenced).
//
// What the type system guarantees is checked at compile time below: the
// protocol's steps (Sync, Account, Arm, Suspend, Resume, Configure) are not
// callable outside ThreadSampler and its scopes, and a scope can be neither
// copied, moved nor allocated with new, so it ends with its block. A call
// such as `sampler.Account(size, tlab)` in the heap does not compile, nor
// (under -Werror) a scope made as a temporary, `SlowPathScope(s, t);`, which
// would arm at once: its constructor is [[nodiscard]]. What
// is left to run time, a second Account() in one slow-path scope, is a debug
// check with a death test here.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "gc/sampler.h"
#include "gc/tlab.h"
#include "gtest/gtest.h"

namespace minivm::gc {
namespace {

// Accessibility is checked in the requirement's immediate context, so each
// concept is false when the step is private rather than ill-formed.
template <typename S>
concept CanSyncDirectly = requires(S& s, const Tlab& t) {
  s.Sync(t);
};
template <typename S>
concept CanAccountDirectly = requires(S& s, const Tlab& t) {
  s.Account(size_t{16}, t);
};
template <typename S>
concept CanArmDirectly = requires(S& s, Tlab& t) {
  s.Arm(t);
};
template <typename S>
concept CanSuspendDirectly = requires(S& s) {
  s.Suspend();
};
template <typename S>
concept CanResumeDirectly = requires(S& s, const Tlab& t) {
  s.Resume(t);
};
template <typename S>
concept CanConfigureDirectly = requires(S& s, const Tlab& t) {
  s.Configure(true, 1, t);
};
template <typename S>
concept CanReconfigure = requires(S& s, Tlab& t) {
  s.Reconfigure(true, 1, t);
};
template <typename Scope>
concept CanAllocateWithNew = requires(ThreadSampler& s, Tlab& t) {
  new Scope(s, t);
};

static_assert(CanReconfigure<ThreadSampler>, "the concepts can say yes");
static_assert(!CanSyncDirectly<ThreadSampler>);
static_assert(!CanAccountDirectly<ThreadSampler>);
static_assert(!CanArmDirectly<ThreadSampler>);
static_assert(!CanSuspendDirectly<ThreadSampler>);
static_assert(!CanResumeDirectly<ThreadSampler>);
static_assert(!CanConfigureDirectly<ThreadSampler>);
static_assert(!std::is_copy_constructible_v<ThreadSampler::SlowPathScope>);
static_assert(!std::is_move_constructible_v<ThreadSampler::SlowPathScope>);
static_assert(!std::is_copy_constructible_v<ThreadSampler::SuspensionScope>);
static_assert(!std::is_move_constructible_v<ThreadSampler::SuspensionScope>);
static_assert(!CanAllocateWithNew<ThreadSampler::SlowPathScope>);
static_assert(!CanAllocateWithNew<ThreadSampler::SuspensionScope>);

constexpr uintptr_t kTlabBytes = uintptr_t{1} << 20;

// A TLAB of kTlabBytes at `start`, full-length current_end (as a refill
// leaves it).
Tlab FreshTlab(uintptr_t start) {
  Tlab t;
  t.start = t.top = start;
  t.end = t.current_end = start + kTlabBytes;
  return t;
}

// Where arming must put current_end for the sampler's current gap.
uintptr_t ArmedEnd(const ThreadSampler& s, const Tlab& t) {
  return std::min(t.end, t.top + static_cast<uintptr_t>(std::floor(s.bytes_until_sample())));
}

class SamplerScopesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sampler_.Seed(/*vm_seed=*/11, /*thread_index=*/0);
    tlab_ = FreshTlab(uintptr_t{1} << 24);
    sampler_.Reconfigure(true, 4096, tlab_);
    ASSERT_LT(tlab_.current_end, tlab_.end) << "seed 11: the first gap passes the TLAB";
  }

  ThreadSampler sampler_;
  Tlab tlab_;
};

TEST_F(SamplerScopesTest, SlowPathScopeChargesTheFastPathsBytesOnEntry) {
  const double before = sampler_.bytes_until_sample();
  tlab_.top += 48;  // the inline fast path, which tells the sampler nothing
  ThreadSampler::SlowPathScope scope(sampler_, tlab_);
  EXPECT_EQ(sampler_.bytes_until_sample(), before - 48);
}

// The slow path refilled the TLAB (current_end == end, as TryAllocate leaves
// it) and then failed: the scope still arms on its way out, so the fast
// path cannot run past the next sample point in the new TLAB.
TEST_F(SamplerScopesTest, SlowPathScopeArmsOnExitWhenTheAllocationFails) {
  {
    ThreadSampler::SlowPathScope scope(sampler_, tlab_);
    sampler_.OnTlabRetired(tlab_);
    tlab_ = FreshTlab(uintptr_t{1} << 28);
    // No Account(): the allocation failed.
  }
  EXPECT_EQ(tlab_.current_end, ArmedEnd(sampler_, tlab_));
  EXPECT_LT(tlab_.current_end, tlab_.end);
}

// The failing slow path collected: the TLAB was retired to all zeros, and
// arming it keeps it empty (tlab.h .empty).
TEST_F(SamplerScopesTest, SlowPathScopeLeavesARetiredTlabEmpty) {
  {
    ThreadSampler::SlowPathScope scope(sampler_, tlab_);
    sampler_.OnTlabRetired(tlab_);
    tlab_ = Tlab{};
  }
  EXPECT_EQ(tlab_.current_end, 0u);
  EXPECT_EQ(tlab_.end, 0u);
}

TEST_F(SamplerScopesTest, SlowPathScopeArmsAfterAccounting) {
  const double r = sampler_.bytes_until_sample();
  ASSERT_GT(r, 64);
  {
    ThreadSampler::SlowPathScope scope(sampler_, tlab_);
    tlab_.top += 64;
    EXPECT_EQ(scope.Account(64).sample_count, 0u);
  }
  EXPECT_EQ(sampler_.bytes_until_sample(), r - 64);
  EXPECT_EQ(tlab_.current_end, ArmedEnd(sampler_, tlab_));
}

// A sample callback (suspended) collects, which retires the TLAB, and the
// collection's own callback suspends again: sampling resumes once, when
// the outermost scope ends, with the gap it had and nothing charged for
// what ran suspended.
TEST_F(SamplerScopesTest, SuspensionScopeNestedInACollectionResumesExactlyOnce) {
  const double r = sampler_.bytes_until_sample();
  {
    ThreadSampler::SuspensionScope callback(sampler_, tlab_);
    EXPECT_FALSE(sampler_.enabled());
    sampler_.OnTlabRetired(tlab_);  // the collection
    tlab_ = Tlab{};
    {
      ThreadSampler::SuspensionScope nested(sampler_, tlab_);
      EXPECT_FALSE(sampler_.enabled());
    }
    EXPECT_FALSE(sampler_.enabled()) << "the inner scope resumed the outer one's suspension";
    EXPECT_EQ(tlab_.current_end, tlab_.end);
    // An allocation while suspended refills and is neither sampled nor charged.
    {
      ThreadSampler::SlowPathScope scope(sampler_, tlab_);
      tlab_ = FreshTlab(uintptr_t{1} << 28);
      tlab_.top += 4096 * 64;
      EXPECT_EQ(scope.Account(4096 * 64).sample_count, 0u);
    }
    EXPECT_EQ(tlab_.current_end, tlab_.end) << "armed while suspended";
  }
  EXPECT_TRUE(sampler_.enabled());
  EXPECT_EQ(sampler_.bytes_until_sample(), r);
  EXPECT_EQ(tlab_.current_end, ArmedEnd(sampler_, tlab_));
  EXPECT_LT(tlab_.current_end, tlab_.end);
}

// A callback reconfigures sampling (interval 0: sample everything): the new
// setting is armed when the suspension ends, so the very next allocation
// leaves the fast path.
TEST_F(SamplerScopesTest, ReconfigureInsideASuspensionTakesEffectWhenItEnds) {
  {
    ThreadSampler::SuspensionScope callback(sampler_, tlab_);
    sampler_.Reconfigure(true, 0, tlab_);
    EXPECT_EQ(tlab_.current_end, tlab_.end);
  }
  EXPECT_EQ(tlab_.current_end, tlab_.top);
  EXPECT_EQ(sampler_.interval(), 0);
}

TEST(SamplerScopesDeathTest, TwoAccountsInOneSlowPathFailTheDebugCheck) {
  ThreadSampler sampler;
  sampler.Seed(3, 0);
  Tlab tlab = FreshTlab(uintptr_t{1} << 24);
  sampler.Reconfigure(false, 4096, tlab);
  EXPECT_DEBUG_DEATH(
      {
        ThreadSampler::SlowPathScope scope(sampler, tlab);
        tlab.top += 32;
        (void)scope.Account(16);
        (void)scope.Account(16);
      },
      "two allocations accounted in one slow path");
}

}  // namespace
}  // namespace minivm::gc
