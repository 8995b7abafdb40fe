// Environments (agent_api/environment.h) through the VMTI functions that
// change them, in the ONLOAD phase (no VM yet), plus the predicates dispatch
// asks: EventEnabledFor and ShouldPost.
#include "agent_api/environment.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "agent_api/functions.h"
#include "gtest/gtest.h"
#include "tests/unit/agent_api/agent_test_util.h"

namespace minivm::agent::testing {
namespace {

bool SameCapabilities(const vmtiCapabilities& a, const vmtiCapabilities& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

using EnvironmentTest = ToolTest;

TEST_F(EnvironmentTest, EventBitsAreDistinctForEveryKnownEvent) {
  std::set<uint64_t> bits;
  int known = 0;
  for (int e = VMTI_MIN_EVENT_TYPE_VAL; e <= VMTI_MAX_EVENT_TYPE_VAL; ++e) {
    if (!IsKnownEvent(e)) continue;
    ++known;
    bits.insert(EventBit(static_cast<vmtiEvent>(e)));
  }
  EXPECT_EQ(known, 9);
  EXPECT_EQ(bits.size(), 9u);
  EXPECT_FALSE(IsKnownEvent(VMTI_MIN_EVENT_TYPE_VAL - 1));
  EXPECT_FALSE(IsKnownEvent(VMTI_MAX_EVENT_TYPE_VAL + 1));
}

TEST_F(EnvironmentTest, NewEnvironmentChecksVersionAndNumbersInCreationOrder) {
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(tools_->NewEnvironment(&p, 0x70020000), VMTI_ERROR_UNSUPPORTED_VERSION);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(tools_->NewEnvironment(nullptr, VMTI_VERSION_1), VMTI_ERROR_NULL_POINTER);
  vmtiEnv* a = NewEnv();
  vmtiEnv* b = NewEnv();
  ASSERT_EQ(tools_->NewEnvironment(&p, VMTI_VERSION_1 | 0x0003), VMTI_ERROR_NONE)
      << "any 1.x minor version";
  EXPECT_EQ(Environment::FromVmti(a)->serial, 0u);
  EXPECT_EQ(Environment::FromVmti(b)->serial, 1u);
  EXPECT_EQ(Environment::FromVmti(static_cast<vmtiEnv*>(p))->serial, 2u);
  vmtiPhase phase;
  ASSERT_EQ(a->GetPhase(&phase), VMTI_ERROR_NONE);
  EXPECT_EQ(phase, VMTI_PHASE_ONLOAD);
}

TEST_F(EnvironmentTest, CapabilitiesAddRelinquishAndPotential) {
  vmtiEnv* env = NewEnv();
  vmtiCapabilities potential;
  ASSERT_EQ(env->GetPotentialCapabilities(&potential), VMTI_ERROR_NONE);
  EXPECT_TRUE(potential.can_generate_sampled_alloc_events);
  EXPECT_TRUE(potential.can_tag_objects);
  EXPECT_TRUE(potential.can_generate_object_free_events);
  EXPECT_TRUE(potential.can_generate_object_promote_events);
  EXPECT_TRUE(potential.can_generate_garbage_collection_events);
  EXPECT_EQ(potential.reserved[0] | potential.reserved[1] | potential.reserved[2], 0u);

  vmtiCapabilities have;
  ASSERT_EQ(env->GetCapabilities(&have), VMTI_ERROR_NONE);
  EXPECT_TRUE(SameCapabilities(have, NoCapabilities())) << "an environment starts with none";

  // Adding accumulates; adding what is held already is not an error.
  vmtiCapabilities tag = NoCapabilities();
  tag.can_tag_objects = 1;
  const vmtiCapabilities sample = SamplingCapability();
  ASSERT_EQ(env->AddCapabilities(&tag), VMTI_ERROR_NONE);
  ASSERT_EQ(env->AddCapabilities(&sample), VMTI_ERROR_NONE);
  ASSERT_EQ(env->AddCapabilities(&sample), VMTI_ERROR_NONE);
  ASSERT_EQ(env->GetCapabilities(&have), VMTI_ERROR_NONE);
  EXPECT_TRUE(have.can_tag_objects && have.can_generate_sampled_alloc_events);
  EXPECT_FALSE(have.can_generate_object_free_events);

  // Relinquishing drops exactly the named ones.
  ASSERT_EQ(env->RelinquishCapabilities(&tag), VMTI_ERROR_NONE);
  ASSERT_EQ(env->GetCapabilities(&have), VMTI_ERROR_NONE);
  EXPECT_FALSE(have.can_tag_objects);
  EXPECT_TRUE(have.can_generate_sampled_alloc_events);
  // Relinquishing one not held is not an error.
  vmtiCapabilities gc_events = NoCapabilities();
  gc_events.can_generate_garbage_collection_events = 1;
  EXPECT_EQ(env->RelinquishCapabilities(&gc_events), VMTI_ERROR_NONE);

  // Bits this VM does not know are not available, and nothing is added.
  vmtiCapabilities unknown = tag;
  unknown.reserved[1] = 1;
  EXPECT_EQ(env->AddCapabilities(&unknown), VMTI_ERROR_NOT_AVAILABLE);
  ASSERT_EQ(env->GetCapabilities(&have), VMTI_ERROR_NONE);
  EXPECT_FALSE(have.can_tag_objects);

  EXPECT_EQ(env->AddCapabilities(nullptr), VMTI_ERROR_NULL_POINTER);
  EXPECT_EQ(env->RelinquishCapabilities(nullptr), VMTI_ERROR_NULL_POINTER);
  EXPECT_EQ(env->GetCapabilities(nullptr), VMTI_ERROR_NULL_POINTER);
  EXPECT_EQ(env->GetPotentialCapabilities(nullptr), VMTI_ERROR_NULL_POINTER);
}

TEST_F(EnvironmentTest, EnvironmentsHaveTheirOwnCapabilitiesAndEvents) {
  vmtiEnv* a = NewEnv();
  vmtiEnv* b = NewEnv();
  SampleEverything(a);
  vmtiCapabilities have;
  ASSERT_EQ(b->GetCapabilities(&have), VMTI_ERROR_NONE);
  EXPECT_FALSE(have.can_generate_sampled_alloc_events);
  EXPECT_TRUE(Environment::FromVmti(a)->ShouldPost(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, nullptr));
  EXPECT_FALSE(Environment::FromVmti(b)->ShouldPost(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, nullptr));
}

TEST_F(EnvironmentTest, EnablingAnEventNeedsItsCapability) {
  vmtiEnv* env = NewEnv();
  const vmtiEvent needs[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_OBJECT_FREE,
                             VMTI_EVENT_OBJECT_PROMOTE, VMTI_EVENT_GARBAGE_COLLECTION_START,
                             VMTI_EVENT_GARBAGE_COLLECTION_FINISH};
  for (vmtiEvent e : needs) {
    EXPECT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, e, nullptr),
              VMTI_ERROR_MUST_POSSESS_CAPABILITY)
        << e;
    EXPECT_FALSE(HasCapabilityFor(NoCapabilities(), e));
  }
  // Events that need no capability.
  for (vmtiEvent e :
       {VMTI_EVENT_VM_INIT, VMTI_EVENT_VM_DEATH, VMTI_EVENT_THREAD_START, VMTI_EVENT_THREAD_END}) {
    EXPECT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, e, nullptr), VMTI_ERROR_NONE) << e;
  }
  EXPECT_EQ(
      env->SetEventNotificationMode(static_cast<vmtiEventMode>(7), VMTI_EVENT_VM_INIT, nullptr),
      VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT_EQ(env->SetEventNotificationMode(
                VMTI_ENABLE, static_cast<vmtiEvent>(VMTI_MAX_EVENT_TYPE_VAL + 1), nullptr),
            VMTI_ERROR_INVALID_EVENT_TYPE);
}

TEST_F(EnvironmentTest, GlobalEnableBits) {
  vmtiEnv* env = NewEnv();
  Environment* e = Environment::FromVmti(env);
  EXPECT_FALSE(e->EventEnabledFor(VMTI_EVENT_VM_INIT, nullptr));
  ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_VM_INIT, nullptr),
            VMTI_ERROR_NONE);
  ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_THREAD_END, nullptr),
            VMTI_ERROR_NONE);
  EXPECT_TRUE(e->EventEnabledFor(VMTI_EVENT_VM_INIT, nullptr));
  EXPECT_TRUE(e->EventEnabledFor(VMTI_EVENT_THREAD_END, nullptr));
  EXPECT_FALSE(e->EventEnabledFor(VMTI_EVENT_THREAD_START, nullptr));
  ASSERT_EQ(env->SetEventNotificationMode(VMTI_DISABLE, VMTI_EVENT_VM_INIT, nullptr),
            VMTI_ERROR_NONE);
  EXPECT_FALSE(e->EventEnabledFor(VMTI_EVENT_VM_INIT, nullptr));
  EXPECT_TRUE(e->EventEnabledFor(VMTI_EVENT_THREAD_END, nullptr)) << "other bits untouched";
}

TEST_F(EnvironmentTest, PerThreadEnableBits) {
  vmtiEnv* env = NewEnv();
  Environment* e = Environment::FromVmti(env);
  // Per-thread switches need a live thread: none before the VM runs, and
  // VM-wide events cannot be switched per thread at all.
  auto* some_thread = reinterpret_cast<vmtiThread>(uintptr_t{0x1000});
  EXPECT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_THREAD_END, some_thread),
            VMTI_ERROR_WRONG_PHASE);
  EXPECT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_VM_INIT, some_thread),
            VMTI_ERROR_ILLEGAL_ARGUMENT);

  // The predicate itself: a thread's own bits, or the global ones.
  const auto* t1 = reinterpret_cast<const VMThread*>(uintptr_t{0x1000});
  const auto* t2 = reinterpret_cast<const VMThread*>(uintptr_t{0x2000});
  {
    base::MutexLock lock(&e->mu);
    e->thread_events[t1] = EventBit(VMTI_EVENT_THREAD_END);
    e->ThreadEventsChangedLocked();
  }
  EXPECT_TRUE(e->EventEnabledFor(VMTI_EVENT_THREAD_END, t1));
  EXPECT_FALSE(e->EventEnabledFor(VMTI_EVENT_THREAD_END, t2));
  EXPECT_FALSE(e->EventEnabledFor(VMTI_EVENT_THREAD_END, nullptr));
  EXPECT_FALSE(e->EventEnabledFor(VMTI_EVENT_THREAD_START, t1));
  ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_THREAD_START, nullptr),
            VMTI_ERROR_NONE);
  EXPECT_TRUE(e->EventEnabledFor(VMTI_EVENT_THREAD_START, t1));
  EXPECT_TRUE(e->EventEnabledFor(VMTI_EVENT_THREAD_START, t2));
}

TEST_F(EnvironmentTest, ShouldPostNeedsTheCapabilityAsWellAsTheEnableBit) {
  vmtiEnv* env = NewEnv();
  Environment* e = Environment::FromVmti(env);
  SampleEverything(env);
  const auto* t1 = reinterpret_cast<const VMThread*>(uintptr_t{0x1000});
  EXPECT_TRUE(e->ShouldPost(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, nullptr));
  EXPECT_TRUE(e->ShouldPost(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, t1));

  // Issue 12: after RelinquishCapabilities the enable bit stays set, and
  // the event must stop all the same.
  const vmtiCapabilities sample = SamplingCapability();
  ASSERT_EQ(env->RelinquishCapabilities(&sample), VMTI_ERROR_NONE);
  EXPECT_TRUE(e->EventEnabledFor(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, nullptr));
  EXPECT_FALSE(e->ShouldPost(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, nullptr));
  EXPECT_FALSE(e->ShouldPost(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, t1));
  // Adding it back resumes the event without enabling it again.
  ASSERT_EQ(env->AddCapabilities(&sample), VMTI_ERROR_NONE);
  EXPECT_TRUE(e->ShouldPost(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, nullptr));

  // The same for every event that needs a capability.
  vmtiCapabilities all;
  ASSERT_EQ(env->GetPotentialCapabilities(&all), VMTI_ERROR_NONE);
  ASSERT_EQ(env->AddCapabilities(&all), VMTI_ERROR_NONE);
  for (vmtiEvent ev : {VMTI_EVENT_OBJECT_FREE, VMTI_EVENT_OBJECT_PROMOTE,
                       VMTI_EVENT_GARBAGE_COLLECTION_START, VMTI_EVENT_GARBAGE_COLLECTION_FINISH}) {
    ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, ev, nullptr), VMTI_ERROR_NONE);
    EXPECT_TRUE(e->ShouldPost(ev, nullptr)) << ev;
  }
  ASSERT_EQ(env->RelinquishCapabilities(&all), VMTI_ERROR_NONE);
  for (vmtiEvent ev :
       {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_OBJECT_FREE, VMTI_EVENT_OBJECT_PROMOTE,
        VMTI_EVENT_GARBAGE_COLLECTION_START, VMTI_EVENT_GARBAGE_COLLECTION_FINISH}) {
    EXPECT_FALSE(e->ShouldPost(ev, nullptr)) << ev;
  }
}

TEST_F(EnvironmentTest, DisposedEnvironmentsGetNothingAndAreRejected) {
  vmtiEnv* env = NewEnv();
  Environment* e = Environment::FromVmti(env);
  ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_VM_DEATH, nullptr),
            VMTI_ERROR_NONE);
  EXPECT_TRUE(e->ShouldPost(VMTI_EVENT_VM_DEATH, nullptr));
  ASSERT_EQ(env->DisposeEnvironment(), VMTI_ERROR_NONE);
  EXPECT_FALSE(e->ShouldPost(VMTI_EVENT_VM_DEATH, nullptr));
  vmtiPhase phase;
  EXPECT_EQ(env->GetPhase(&phase), VMTI_ERROR_INVALID_ENVIRONMENT);
  EXPECT_EQ(env->DisposeEnvironment(), VMTI_ERROR_INVALID_ENVIRONMENT);
}

// DisposeEnvironment releases the environment: 100,000 create/dispose
// cycles (a profiler started and stopped that often) never run out, use a
// bounded number of pool slots, and a disposed environment stays rejected
// until EnvironmentPool::kCooldown later ones were disposed.
TEST_F(EnvironmentTest, EnvironmentsAreReclaimed) {
  vmtiEnv* keep = NewEnv();
  vmtiEnv* first = nullptr;
  int max_slot = 0;
  for (int i = 0; i < 100000; ++i) {
    void* p = nullptr;
    ASSERT_EQ(tools_->NewEnvironment(&p, VMTI_VERSION_1), VMTI_ERROR_NONE) << "cycle " << i;
    auto* env = static_cast<vmtiEnv*>(p);
    max_slot = std::max(max_slot, Environment::FromVmti(env)->id);
    vmtiPhase phase;
    ASSERT_EQ(env->GetPhase(&phase), VMTI_ERROR_NONE);
    if (i == 0) first = env;
    if (i > 0 && i <= EnvironmentPool::kCooldown) {
      EXPECT_EQ(first->GetPhase(&phase), VMTI_ERROR_INVALID_ENVIRONMENT) << "cycle " << i;
    }
    ASSERT_EQ(env->DisposeEnvironment(), VMTI_ERROR_NONE);
  }
  // Slots are process-wide and recycled only within one ToolInterface: this
  // test's slots start at keep's.
  EXPECT_LE(max_slot - Environment::FromVmti(keep)->id, EnvironmentPool::kCooldown + 2)
      << "slots are recycled";
  EXPECT_EQ(Environment::FromVmti(keep)->serial, 0u);
  EXPECT_EQ(tools_->NewEnvironment(reinterpret_cast<void**>(&first), VMTI_VERSION_1),
            VMTI_ERROR_NONE);
  EXPECT_EQ(Environment::FromVmti(first)->serial, 100001u) << "serials are never reused";
  vmtiPhase phase;
  EXPECT_EQ(keep->GetPhase(&phase), VMTI_ERROR_NONE) << "a live environment is never recycled";
}

TEST_F(EnvironmentTest, ForgedEnvironmentsAreRejectedUnread) {
  // Points at a function table, but was never made by GetEnv.
  struct {
    const vmtiInterface_1* functions;
  } forged{&FunctionTable()};
  auto* env = reinterpret_cast<vmtiEnv*>(&forged);
  vmtiPhase phase;
  EXPECT_EQ(env->GetPhase(&phase), VMTI_ERROR_INVALID_ENVIRONMENT);
  void* data;
  EXPECT_EQ(env->GetEnvironmentLocalStorage(&data), VMTI_ERROR_INVALID_ENVIRONMENT);
}

TEST_F(EnvironmentTest, CallbacksAreSetReplacedAndCleared) {
  vmtiEnv* env = NewEnv();
  Environment* e = Environment::FromVmti(env);
  EXPECT_EQ(e->Callbacks().SampledObjectAlloc, &OnSample);  // set by NewEnv
  EXPECT_EQ(e->Callbacks().ObjectFree, &OnFree);

  // A shorter (older) struct fills a prefix; the rest are cleared.
  vmtiEventCallbacks cb;
  std::memset(&cb, 0, sizeof cb);
  cb.VMInit = &OnVmInit;
  cb.VMDeath = &OnVmDeath;
  ASSERT_EQ(env->SetEventCallbacks(&cb, offsetof(vmtiEventCallbacks, VMDeath)), VMTI_ERROR_NONE);
  EXPECT_EQ(e->Callbacks().VMInit, &OnVmInit);
  EXPECT_EQ(e->Callbacks().VMDeath, nullptr);
  EXPECT_EQ(e->Callbacks().SampledObjectAlloc, nullptr);

  // NULL clears them all.
  ASSERT_EQ(env->SetEventCallbacks(nullptr, 0), VMTI_ERROR_NONE);
  const vmtiEventCallbacks none = e->Callbacks();
  vmtiEventCallbacks zero;
  std::memset(&zero, 0, sizeof zero);
  EXPECT_EQ(std::memcmp(&none, &zero, sizeof zero), 0);
  EXPECT_EQ(env->SetEventCallbacks(&cb, -1), VMTI_ERROR_ILLEGAL_ARGUMENT);
}

TEST_F(EnvironmentTest, LocalStorageIsPerEnvironment) {
  void* p = nullptr;
  ASSERT_EQ(tools_->NewEnvironment(&p, VMTI_VERSION_1), VMTI_ERROR_NONE);
  auto* a = static_cast<vmtiEnv*>(p);
  ASSERT_EQ(tools_->NewEnvironment(&p, VMTI_VERSION_1), VMTI_ERROR_NONE);
  auto* b = static_cast<vmtiEnv*>(p);
  void* data = reinterpret_cast<void*>(1);
  ASSERT_EQ(a->GetEnvironmentLocalStorage(&data), VMTI_ERROR_NONE);
  EXPECT_EQ(data, nullptr) << "starts empty";
  int x = 0, y = 0;
  ASSERT_EQ(a->SetEnvironmentLocalStorage(&x), VMTI_ERROR_NONE);
  ASSERT_EQ(b->SetEnvironmentLocalStorage(&y), VMTI_ERROR_NONE);
  ASSERT_EQ(a->GetEnvironmentLocalStorage(&data), VMTI_ERROR_NONE);
  EXPECT_EQ(data, &x);
  ASSERT_EQ(b->GetEnvironmentLocalStorage(&data), VMTI_ERROR_NONE);
  EXPECT_EQ(data, &y);
  ASSERT_EQ(a->SetEnvironmentLocalStorage(nullptr), VMTI_ERROR_NONE);
  ASSERT_EQ(a->GetEnvironmentLocalStorage(&data), VMTI_ERROR_NONE);
  EXPECT_EQ(data, nullptr);
  EXPECT_EQ(a->GetEnvironmentLocalStorage(nullptr), VMTI_ERROR_NULL_POINTER);
}

}  // namespace
}  // namespace minivm::agent::testing
