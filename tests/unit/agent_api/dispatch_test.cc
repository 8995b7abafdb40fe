// Event dispatch (agent_api/tool_interface.h, .dispatch and .events) with a
// real VM running a hand-assembled program: which environments an event
// reaches, in which order, and what a callback's own VMTI calls change.
#include <string>
#include <vector>

#include "agent_api/tool_interface.h"
#include "gtest/gtest.h"
#include "tests/unit/agent_api/agent_test_util.h"

namespace minivm::agent::testing {
namespace {

using DispatchTest = ToolTest;

constexpr int kAllocations = 5;

// The entries of GlobalLog() that are `what` events, as "<env>:<what>".
std::vector<std::string> LogOf(const std::string& what) {
  std::vector<std::string> out;
  for (const std::string& s : GlobalLog()) {
    if (s.substr(s.find(':') + 1).rfind(what, 0) == 0) out.push_back(s);
  }
  return out;
}

TEST_F(DispatchTest, SampledObjectAllocReachesTheEnablingEnvironmentsInCreationOrder) {
  vmtiEnv* a = NewEnv();
  vmtiEnv* b = NewEnv();  // holds the capability, never enables the event
  vmtiEnv* c = NewEnv();
  vmtiEnv* d = NewEnv();  // enables nothing
  SampleEverything(a);
  const vmtiCapabilities caps = SamplingCapability();
  ASSERT_EQ(b->AddCapabilities(&caps), VMTI_ERROR_NONE);
  SampleEverything(c);
  for (vmtiEnv* env : {a, b, c}) {
    ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_VM_INIT, nullptr),
              VMTI_ERROR_NONE);
    ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_VM_DEATH, nullptr),
              VMTI_ERROR_NONE);
  }
  ASSERT_EQ(Run(AllocatingProgram(kAllocations, false)), 0) << err_;

  EXPECT_EQ(Rec(a).sampled, kAllocations);
  EXPECT_EQ(Rec(b).sampled, 0);
  EXPECT_EQ(Rec(c).sampled, kAllocations);
  EXPECT_TRUE(Rec(d).events.empty());
  // Each allocation reaches a, then c, before the next allocation.
  std::vector<std::string> expected = {"0:init", "1:init", "2:init"};
  for (int i = 0; i < kAllocations; ++i) {
    expected.push_back("0:sample");
    expected.push_back("2:sample");
  }
  for (const char* death : {"0:death", "1:death", "2:death"}) expected.push_back(death);
  EXPECT_EQ(GlobalLog(), expected);
}

TEST_F(DispatchTest, RelinquishingTheCapabilityStopsSamplingWhileAnotherEnvSamples) {
  // Issue 12: the enable bit stays set after RelinquishCapabilities, and the
  // sampler keeps running for the other environment.
  vmtiEnv* keeps = NewEnv();
  vmtiEnv* gives_up = NewEnv();
  SampleEverything(keeps);
  SampleEverything(gives_up);
  Rec(gives_up).on_sample = [](vmtiEnv* env, vmtiObject) {
    const vmtiCapabilities caps = SamplingCapability();
    EXPECT_EQ(env->RelinquishCapabilities(&caps), VMTI_ERROR_NONE);
  };
  ASSERT_EQ(Run(AllocatingProgram(kAllocations, false)), 0) << err_;
  EXPECT_EQ(Rec(keeps).sampled, kAllocations);
  EXPECT_EQ(Rec(gives_up).sampled, 1);
}

TEST_F(DispatchTest, ACallbackDisablingTheEventForALaterEnvironmentTakesEffectAtOnce) {
  vmtiEnv* first = NewEnv();
  vmtiEnv* second = NewEnv();
  vmtiEnv* third = NewEnv();
  SampleEverything(first);
  SampleEverything(second);
  SampleEverything(third);
  static vmtiEnv* victim;  // callbacks capture nothing
  victim = third;
  // On the third allocation, `first` switches `third` off: `third` misses
  // that very allocation, not only later ones.
  Rec(first).on_sample = [](vmtiEnv* env, vmtiObject) {
    if (RecorderOf(env)->sampled == 3) {
      EXPECT_EQ(
          victim->SetEventNotificationMode(VMTI_DISABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, nullptr),
          VMTI_ERROR_NONE);
    }
  };
  ASSERT_EQ(Run(AllocatingProgram(kAllocations, false)), 0) << err_;
  EXPECT_EQ(Rec(first).sampled, kAllocations);
  EXPECT_EQ(Rec(second).sampled, kAllocations);
  EXPECT_EQ(Rec(third).sampled, 2);
}

TEST_F(DispatchTest, PerThreadEnablingSamplesOnlyThatThread) {
  vmtiEnv* everywhere = NewEnv();
  vmtiEnv* main_only = NewEnv();
  SampleEverything(everywhere);
  const vmtiCapabilities caps = SamplingCapability();
  ASSERT_EQ(main_only->AddCapabilities(&caps), VMTI_ERROR_NONE);
  ASSERT_EQ(main_only->SetHeapSamplingInterval(0), VMTI_ERROR_NONE);  // its own (.interval)
  // Per-thread switches need a live thread: main's, from VMInit.
  vmtiEventCallbacks cb = RecordingCallbacks();
  cb.VMInit = [](vmtiEnv* env, vmtiThread thread) {
    Note(env, "init");
    EXPECT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, thread),
              VMTI_ERROR_NONE);
  };
  ASSERT_EQ(main_only->SetEventCallbacks(&cb, sizeof cb), VMTI_ERROR_NONE);
  ASSERT_EQ(main_only->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_VM_INIT, nullptr),
            VMTI_ERROR_NONE);

  // main: allocate, spawn a worker that allocates, join it, allocate again.
  minivm::testing::ProgramBuilder pb;
  const uint32_t p = pb.AddClass("P", {});
  minivm::testing::Asm w;
  for (int i = 0; i < 3; ++i) w.New(p, 0).Store(0);
  w.Null().Ret();
  const uint32_t worker = pb.AddFunction("worker", 0, 1, 4, w);
  minivm::testing::Asm m;
  m.New(p, 0).Store(0);
  m.Spawn(worker, 0).Builtin(Builtin::k_join, 1).Op(Opcode::POP);
  m.New(p, 0).Store(0).Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 1, 4, m));
  ASSERT_EQ(Run(pb.Build()), 0) << err_;

  ASSERT_FALSE(Rec(main_only).sample_threads.empty())
      << ::testing::PrintToString(GlobalLog()) << " everywhere: " << Rec(everywhere).sampled;
  const vmtiThread main_thread = Rec(main_only).sample_threads.front();
  int everywhere_on_main = 0, everywhere_elsewhere = 0;
  for (vmtiThread t : Rec(everywhere).sample_threads) {
    ++(t == main_thread ? everywhere_on_main : everywhere_elsewhere);
  }
  for (vmtiThread t : Rec(main_only).sample_threads) EXPECT_EQ(t, main_thread);
  EXPECT_EQ(Rec(main_only).sampled, everywhere_on_main);
  EXPECT_GE(everywhere_on_main, 2);
  EXPECT_GE(everywhere_elsewhere, 3) << "the worker's allocations";
}

TEST_F(DispatchTest, ObjectFreeComesInTaggingOrderToTheTaggingEnvironment) {
  vmtiEnv* a = NewEnv();
  vmtiEnv* b = NewEnv();
  vmtiEnv* quiet = NewEnv();  // tags, but has not enabled ObjectFree
  vmtiCapabilities caps = SamplingCapability();
  caps.can_tag_objects = 1;
  caps.can_generate_object_free_events = 1;
  for (vmtiEnv* env : {a, b, quiet}) {
    SampleEverything(env);
    ASSERT_EQ(env->AddCapabilities(&caps), VMTI_ERROR_NONE);
  }
  for (vmtiEnv* env : {a, b}) {
    ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_OBJECT_FREE, nullptr),
              VMTI_ERROR_NONE);
  }
  // Each environment tags the n-th sampled object 100 * (env id + 1) + n.
  for (vmtiEnv* env : {a, b, quiet}) {
    Rec(env).on_sample = [](vmtiEnv* env, vmtiObject object) {
      const Recorder* r = RecorderOf(env);
      EXPECT_EQ(env->SetTag(object, 100 * (r->id + 1) + r->sampled), VMTI_ERROR_NONE);
      vmtiLong tag = 0;
      EXPECT_EQ(env->GetTag(object, &tag), VMTI_ERROR_NONE);
      EXPECT_EQ(tag, 100 * (r->id + 1) + r->sampled);
    };
  }
  ASSERT_EQ(Run(AllocatingProgram(kAllocations, true)), 0) << err_;

  // Slots were made a, b, quiet for each object in turn, and a collection
  // reports them in slot order: the frees interleave the same way. (Slot
  // ids are process-wide: earlier tests in this process hold lower ones.)
  std::vector<std::string> expected;
  for (int n = 1; n <= kAllocations; ++n) {
    for (vmtiEnv* env : {a, b}) {
      const int id = Rec(env).id;
      expected.push_back(std::to_string(id) + ":free " + std::to_string(100 * (id + 1) + n));
    }
  }
  EXPECT_EQ(LogOf("free"), expected);
  EXPECT_TRUE(Rec(quiet).freed_tags.empty());
}

TEST_F(DispatchTest, GarbageCollectionEventsNeedTheCapabilityAtDispatch) {
  vmtiEnv* a = NewEnv();
  vmtiEnv* b = NewEnv();
  vmtiCapabilities caps = NoCapabilities();
  caps.can_generate_garbage_collection_events = 1;
  for (vmtiEnv* env : {a, b}) {
    ASSERT_EQ(env->AddCapabilities(&caps), VMTI_ERROR_NONE);
    ASSERT_EQ(
        env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_GARBAGE_COLLECTION_START, nullptr),
        VMTI_ERROR_NONE);
    ASSERT_EQ(
        env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_GARBAGE_COLLECTION_FINISH, nullptr),
        VMTI_ERROR_NONE);
  }
  // b gives the capability up before the VM starts; its bits stay set.
  ASSERT_EQ(b->RelinquishCapabilities(&caps), VMTI_ERROR_NONE);
  ASSERT_EQ(Run(AllocatingProgram(1, true)), 0) << err_;
  ASSERT_FALSE(Rec(a).events.empty());
  EXPECT_EQ(Rec(a).events.front(), "gc start");
  EXPECT_EQ(Rec(a).events.back(), "gc finish");
  EXPECT_TRUE(Rec(b).events.empty());
}

}  // namespace
}  // namespace minivm::agent::testing
