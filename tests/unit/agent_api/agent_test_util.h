// Shared fixtures for the agent API's unit tests: a ToolInterface with
// environments made through GetEnv's own path (NewEnvironment), VMTI calls
// through the real function table, and a runner that starts a real VM with
// the ToolInterface attached exactly as vm/main.cc does. Programs are
// hand-assembled (tests/unit/vm/program_builder.h); the heap-level tests use
// the GC's fixture (tests/unit/gc/gc_test_util.h).
//
// Callbacks are plain C function pointers: each test environment keeps its
// recorder in the environment's local storage, so one callback serves every
// environment and says which one it ran for.
#ifndef MINIVM_TESTS_UNIT_AGENT_API_AGENT_TEST_UTIL_H_
#define MINIVM_TESTS_UNIT_AGENT_API_AGENT_TEST_UTIL_H_

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent_api/environment.h"
#include "agent_api/tool_interface.h"
#include "gtest/gtest.h"
#include "tests/unit/vm/program_builder.h"
#include "vmti/vmti.h"

namespace minivm::agent::testing {

inline vmtiCapabilities NoCapabilities() {
  vmtiCapabilities c;
  std::memset(&c, 0, sizeof c);
  return c;
}
inline vmtiCapabilities SamplingCapability() {
  vmtiCapabilities c = NoCapabilities();
  c.can_generate_sampled_alloc_events = 1;
  return c;
}

// What one environment saw, in order. Kept in the env's local storage.
struct Recorder {
  int id = -1;  // the environment's creation index
  std::vector<std::string> events;
  std::vector<vmtiLong> freed_tags;
  std::vector<vmtiLong> promoted_tags;
  int sampled = 0;
  std::vector<vmtiThread> sample_threads;  // the thread of each sample
  // Runs inside SampledObjectAlloc after it is recorded (may call VMTI).
  std::function<void(vmtiEnv*, vmtiObject)> on_sample;
};

// Every event any test environment received, across environments, in the
// order they arrived: "<env id>:<event>".
inline std::vector<std::string>& GlobalLog() {
  static auto* log = new std::vector<std::string>();
  return *log;
}

inline Recorder* RecorderOf(vmtiEnv* env) {
  void* data = nullptr;
  EXPECT_EQ(env->GetEnvironmentLocalStorage(&data), VMTI_ERROR_NONE);
  return static_cast<Recorder*>(data);
}

inline void Note(vmtiEnv* env, const std::string& what) {
  Recorder* r = RecorderOf(env);
  r->events.push_back(what);
  GlobalLog().push_back(std::to_string(r->id) + ":" + what);
}

inline void OnSample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass, vmtiLong size) {
  Recorder* r = RecorderOf(env);
  EXPECT_GT(size, 0);
  ++r->sampled;
  r->sample_threads.push_back(thread);
  Note(env, "sample");
  if (r->on_sample) r->on_sample(env, object);
}
inline void OnFree(vmtiEnv* env, vmtiLong tag) {
  RecorderOf(env)->freed_tags.push_back(tag);
  Note(env, "free " + std::to_string(tag));
}
inline void OnPromote(vmtiEnv* env, vmtiLong tag) {
  RecorderOf(env)->promoted_tags.push_back(tag);
  Note(env, "promote " + std::to_string(tag));
}
inline void OnVmInit(vmtiEnv* env, vmtiThread) { Note(env, "init"); }
inline void OnVmDeath(vmtiEnv* env) { Note(env, "death"); }
inline void OnGcStart(vmtiEnv* env) { Note(env, "gc start"); }
inline void OnGcFinish(vmtiEnv* env) { Note(env, "gc finish"); }

// Every callback above.
inline vmtiEventCallbacks RecordingCallbacks() {
  vmtiEventCallbacks cb;
  std::memset(&cb, 0, sizeof cb);
  cb.VMInit = &OnVmInit;
  cb.VMDeath = &OnVmDeath;
  cb.SampledObjectAlloc = &OnSample;
  cb.GarbageCollectionStart = &OnGcStart;
  cb.GarbageCollectionFinish = &OnGcFinish;
  cb.ObjectFree = &OnFree;
  cb.ObjectPromote = &OnPromote;
  return cb;
}

class ToolTest : public ::testing::Test {
 protected:
  void SetUp() override { GlobalLog().clear(); }
  void TearDown() override {
    // The thread-local agent state names the VM thread of the last run; that
    // VM is gone, and the next test must not see it.
    CurrentAgentThreadState().thread = nullptr;
    GlobalLog().clear();
  }

  // A new environment (GetEnv), with a recorder in its local storage and
  // every recording callback set; no capabilities, no events enabled.
  vmtiEnv* NewEnv() {
    void* p = nullptr;
    EXPECT_EQ(tools_->NewEnvironment(&p, VMTI_VERSION_1), VMTI_ERROR_NONE);
    auto* env = static_cast<vmtiEnv*>(p);
    recorders_.push_back(std::make_unique<Recorder>());
    recorders_.back()->id = Environment::FromVmti(env)->id;
    EXPECT_EQ(env->SetEnvironmentLocalStorage(recorders_.back().get()), VMTI_ERROR_NONE);
    const vmtiEventCallbacks cb = RecordingCallbacks();
    EXPECT_EQ(env->SetEventCallbacks(&cb, sizeof cb), VMTI_ERROR_NONE);
    return env;
  }
  // The sampling capability, SampledObjectAlloc enabled for every thread,
  // and the interval 0 (every allocation is sampled).
  static void SampleEverything(vmtiEnv* env) {
    const vmtiCapabilities caps = SamplingCapability();
    ASSERT_EQ(env->AddCapabilities(&caps), VMTI_ERROR_NONE);
    ASSERT_EQ(env->SetEventNotificationMode(VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, nullptr),
              VMTI_ERROR_NONE);
    ASSERT_EQ(env->SetHeapSamplingInterval(0), VMTI_ERROR_NONE);
  }

  // Runs `program` in-process with the ToolInterface attached (vm/main.cc's
  // order: agents first, then VM::Create, AttachVm, Run). Returns the exit
  // code; the program's output is discarded.
  int Run(std::unique_ptr<Program> program, VmOptions options = {}) {
    minivm::testing::RunHooks hooks;
    hooks.before_run = [this](VM& vm) { tools_->AttachVm(&vm); };
    minivm::testing::RunResult r =
        minivm::testing::RunProgram(std::move(program), std::move(options), hooks);
    CurrentAgentThreadState().thread = nullptr;
    EXPECT_NE(r.exit_code, -1) << r.err;
    err_ = std::move(r.err);
    return r.exit_code;
  }

  // main() { repeat n: local0 = new P(); [gc()]; return null; }: `n`
  // allocations of a fieldless object, each dead once the next is made;
  // with `collect`, a collection after the last one.
  static std::unique_ptr<Program> AllocatingProgram(int n, bool collect) {
    minivm::testing::ProgramBuilder pb;
    const uint32_t p = pb.AddClass("P", {});
    minivm::testing::Asm m;
    for (int i = 0; i < n; ++i) m.New(p, 0).Store(0);
    if (collect) m.Null().Store(0).Builtin(Builtin::k_gc, 0).Op(Opcode::POP);
    m.Null().Ret();
    pb.SetMain(pb.AddFunction("main", 0, 1, 4, m));
    return pb.Build();
  }

  Recorder& Rec(vmtiEnv* env) { return *RecorderOf(env); }

  std::unique_ptr<ToolInterface> tools_ = std::make_unique<ToolInterface>();
  std::vector<std::unique_ptr<Recorder>> recorders_;
  std::string err_;  // the last run's stderr
};

}  // namespace minivm::agent::testing

#endif  // MINIVM_TESTS_UNIT_AGENT_API_AGENT_TEST_UTIL_H_
