// The agent subsystem: environments, phases, sampling control,
// and the posting of every VMTI event. One per VM.
//
// Design
// ------
// .lifetime  Lifetime. Agents are loaded (Agent_OnLoad, phase ONLOAD) before the VM
//    object exists; AttachVm then registers this object as the VM's
//    ToolHooks and the heap's SampleObserver, GcObserver and WeakObserver.
//    OnVMInit switches to LIVE and arms the sampler; OnVMDeath runs with
//    every other thread stopped for good, switches to DEAD, and nothing is
//    posted after it.
// .sampling  Sampling control. A thread samples iff some live environment with the
//    capability enabled SampledObjectAlloc globally or for that thread.
//    Every change to that predicate or to an interval re-arms every thread
//    at a safepoint (Heap::ReconfigureSampling), so it takes effect at each
//    thread's next allocation. Outside LIVE the settings are only recorded.
// .interval  An interval per environment (the contract's third edition;
//    HotSpot has one VM-wide interval, the last setting winning). A thread
//    samples at the finest interval of the environments that sample it, and
//    each environment at a coarser one gets the sample thinned to its own
//    (gc/sampler.h .thin): its events are a Poisson process at its interval
//    and GetSampleInfo reports its count, interval and weight. An
//    environment at interval 0 makes every allocation a sample for the
//    others to thin, so the cost is that of the finest interval, and what
//    the others receive is unchanged in distribution.
// .dispatch  Event dispatch. Callbacks run without any VMTI lock held (agents may
//    call back into VMTI, enable events, or force collections from them),
//    and in native state (agent_api/thread_states.h: a collection may run
//    while one runs; GarbageCollectionStart/Finish excepted, they run inside
//    the pause). Whatever a callback's arguments need from an object is read
//    before the thread goes native. Dispatch visits the live environments
//    (a bitmap of pool slots, lowest first: creation order among
//    environments never disposed), read without a lock, so a sample costs in
//    proportion to the environments alive, not to every one ever made
//    (environment.h, .pool).
// .handles  Object handles. A vmtiObject is an opaque token naming a root slot
//    (the heap's sample root, which every collection visits and updates,
//    also while the thread is native) for the duration of one callback,
//    resolved only in the VM state (VmScope). Tokens are
//    never reused, so a handle kept past its callback cannot alias a later
//    one even though the slot is the same; each thread keeps its live
//    (token, slot) pairs, and anything else an agent passes is rejected with
//    VMTI_ERROR_INVALID_OBJECT. A stale or forged handle cannot crash the VM.
// .events  Lifecycle events. ObjectPromote and ObjectFree come from the GC's
//    weak-slot reports, handed over after the pause by the thread that
//    collected (gc/weak_table.h, .delivery), and delivered by that
//    thread, in the order its collection found them. Per object, the tag
//    map (tags.h, .order) keeps them in report order across threads and
//    parks an early one with the object's record: so a callback that blocks
//    holds up its own thread and later events of the same object only,
//    never another thread's collection or other objects' events, and an
//    explicit collection returns once its own events were delivered, except
//    the events of objects whose earlier event another thread is still
//    delivering (that thread delivers them when it is done). Nesting: events
//    that arise while the thread is inside a callback (a collection the
//    callback forced) stay in the thread's pending batch and are delivered
//    when its outermost callback returns, before it returns to the program;
//    VMDeath's callbacks excepted, since nothing may follow VMDeath: a
//    collection forced there delivers its events before it returns. Every
//    batch being delivered is registered (EventBatch), so VM death can take
//    over what its thread has not claimed yet (.death).
// .death  VM death. Once VMDeath starts, every other thread is stopped for good:
//    re-configuring sampling is a no-op, and ForceGarbageCollection works only
//    on the dying thread (any other caller, such as an agent's own thread,
//    would wait forever for a safepoint that cannot start). Before VMDeath
//    is posted, the dying thread delivers every event of a completed
//    collection that no thread claimed yet, waits up to kDeathDrainWait for
//    the events other threads claimed to be handled (their callbacks to
//    return), and delivers what those handed over meanwhile; what a
//    callback still blocked after that holds up (later events of its own
//    object) is dropped.
// .agent-threads  Agent threads (RunAgentThread, agent_threads.cc) are VM threads to the
//    agent API (handles, names, ThreadStart/ThreadEnd, per-thread events)
//    but outsiders to the heap: never attached, so never waited for by a
//    safepoint; their heap requests (collections, safepoint operations) are
//    made as a non-mutator's (RequesterMutator). Once VM death begins no
//    event is posted from any thread but the dying one (EventsStoppedHere),
//    and their RawMonitorWaits are interrupted (raw_monitors.h).
// .held  Held objects. GetObjectsWithTags returns handles that outlive one
//    call: until the calling callback returns, or, on an agent's own thread,
//    until the next VMTI call returns. Their slots are gathered with the
//    world stopped and live in per-thread batches registered process-wide;
//    the VM visits them with its global roots (VisitToolRoots), so they are
//    updated when objects move. Tokens come from the same never-reused
//    counter as callback handles.
// .attach  Attach. An agent may be loaded into the running VM
//    (vm/runtime/attach_listener.h). If no agent was loaded at start-up, the
//    ToolInterface is made then and AttachLive registers it in phase LIVE
//    (no VMInit is posted); threads already running get ThreadEnd but no
//    ThreadStart. Agent_OnAttach runs on the attach listener's thread, a
//    native thread (GetCurrentThread gives INVALID_THREAD there), with no
//    lock of this object held: an agent that never returns cannot keep the
//    VM from ending. At VM death such an agent is not unloaded (no
//    Agent_OnUnload; its library stays mapped).
#ifndef MINIVM_AGENT_API_TOOL_INTERFACE_H_
#define MINIVM_AGENT_API_TOOL_INTERFACE_H_

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent_api/agent_loader.h"
#include "agent_api/environment.h"
#include "base/sync.h"
#include "gc/gc_observer.h"
#include "gc/weak_table.h"
#include "vm/runtime/tool_hooks.h"
#include "vmti/vmti.h"

namespace minivm {
class VM;
struct VMThread;
}  // namespace minivm

namespace minivm::agent {

class ToolInterface;

// One thread's weak events on their way to the agents (.events).
// Registered with the ToolInterface while they are, so VM death can claim
// what the thread has not.
struct EventBatch {
  std::vector<gc::WeakEvent> events;  // appended and claimed under the tool's batches_mu_
  size_t next = 0;                    // the first event not yet claimed
};

// Per-OS-thread state of the agent API.
struct AgentThreadState {
  VMThread* thread = nullptr;        // null on a native thread an agent made
  struct Handle {
    uint64_t token;  // the vmtiObject value
    gc::Value* slot;
  };
  std::vector<Handle> handles;       // live vmtiObject handles, innermost last
  const gc::SampleDecision* sample = nullptr;  // inside SampledObjectAlloc
  gc::Generation sample_generation = gc::Generation::kYoung;
  int restricted_depth = 0;          // inside GarbageCollectionStart/Finish
  int heap_callback_depth = 0;       // inside a heap walk's callback (heap_walk.cc)
  int callback_depth = 0;            // inside an event callback (CallbackScope)
  // Weak events this thread's collections found (.events),
  // registered with `pending_tool` from the pause on; delivered after the
  // pause, or when callback_depth returns to 0 if they arose inside a
  // callback.
  std::unique_ptr<EventBatch> pending;
  ToolInterface* pending_tool = nullptr;
  bool draining = false;  // DrainPending is on this thread's stack
  bool in_vm_death = false;        // inside VMDeath's callbacks

  // Objects GetObjectsWithTags returned (.held): tokens
  // [first_token, first_token + slots.size()) name slots[i]. The slots are
  // roots (ToolInterface::VisitToolRoots) while the batch lives.
  struct HeldBatch {
    uint64_t first_token = 0;
    std::vector<gc::Value> slots;
    int callback_depth = 0;  // the depth it was made at
    int calls_seen = 0;      // later calls at depth 0 (agent threads)
  };
  std::vector<std::unique_ptr<HeldBatch>> held;

  AgentThreadState() = default;
  AgentThreadState(const AgentThreadState&) = delete;
  AgentThreadState& operator=(const AgentThreadState&) = delete;
  ~AgentThreadState();  // releases what is still held
};
AgentThreadState& CurrentAgentThreadState();
// The calling thread's mutator if it is a VM thread attached to the heap,
// else null (agent threads and native threads; .agent-threads): the
// requester to name in heap calls that may start a safepoint.
gc::Mutator* RequesterMutator();

// Held batches, process-wide, so a collection can visit them as roots.
void RegisterHeldBatch(AgentThreadState::HeldBatch* batch);
void UnregisterHeldBatch(AgentThreadState::HeldBatch* batch);
// Releases this thread's batches made at `callback_depth` or deeper.
void ReleaseHeldBatches(AgentThreadState& ts, int callback_depth);
// At the entry of every VMTI call: on a thread outside any callback (an
// agent's own thread), a batch stays valid until the call after the one
// that made it returns, and is released when the next one starts.
inline void AgeHeldBatches(AgentThreadState& ts) {
  if (ts.held.empty() || ts.callback_depth > 0) return;
  bool release = false;
  for (auto& b : ts.held) release |= ++b->calls_seen >= 2;
  if (release) {
    std::erase_if(ts.held, [](const std::unique_ptr<AgentThreadState::HeldBatch>& b) {
      if (b->calls_seen < 2) return false;
      UnregisterHeldBatch(b.get());
      return true;
    });
  }
}
// Delivers the thread's pending weak events (.events).
void DeliverPendingWeakEvents(AgentThreadState& ts);
// Marks the extent of one event callback: batches made inside it are
// released when it returns, and weak events that arose inside the
// outermost one are delivered then.
class CallbackScope {
 public:
  explicit CallbackScope(AgentThreadState& ts) : ts_(ts) { ++ts_.callback_depth; }
  ~CallbackScope() {
    ReleaseHeldBatches(ts_, ts_.callback_depth);
    if (--ts_.callback_depth == 0 && ts_.pending != nullptr && !ts_.draining) {
      DeliverPendingWeakEvents(ts_);
    }
  }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  AgentThreadState& ts_;
};

class ToolInterface final : public ToolHooks,
                            public gc::SampleObserver,
                            public gc::GcObserver,
                            public gc::WeakObserver {
 public:
  ToolInterface();
  ~ToolInterface() override;
  ToolInterface(const ToolInterface&) = delete;
  ToolInterface& operator=(const ToolInterface&) = delete;

  // Loads and starts every agent in order (phase ONLOAD). The first failure
  // is returned as a one-line message naming the agent: InvalidArgument for
  // a malformed option (checked for all of them before any agent loads),
  // another code for an agent that cannot be loaded or fails to start.
  absl::Status LoadAgents(const std::vector<std::string>& agent_options);
  // Registers with the VM and its heap. Call once, after VM::Create.
  void AttachVm(VM* vm);
  // For a ToolInterface made while the VM runs (.attach):
  // registers with the running VM directly in the LIVE phase. False (and
  // nothing registered with the VM) before the VM started or once it ends.
  bool AttachLive(VM* vm);
  // Loads one agent into the running VM and calls its Agent_OnAttach
  // (phase LIVE). Returns its return code; a library that cannot be opened,
  // or has no Agent_OnAttach, is an error status naming it.
  absl::StatusOr<vmtiInt> AttachAgent(const AgentSpec& spec);
  // For `minivm-attach agents` and `heap`: one line per loaded agent, and
  // the sampling lines (docs/attach.md).
  std::string DescribeAgents();
  std::string DescribeSampling();
  // Agent_OnUnload for each agent, after VM death.
  void UnloadAgents();

  // GetEnv.
  vmtiError NewEnvironment(void** penv, vmtiInt version);
  // DisposeEnvironment: events stop, tags are cleared, the slot is recycled
  // (environment.h, .pool).
  void DisposeEnvironment(Environment* env);
  // How long VM death waits for other threads' weak-event callbacks.
  static constexpr absl::Duration kDeathDrainWait = absl::Seconds(1);

  vmtiPhase phase() const { return phase_.load(std::memory_order_acquire); }
  VM* vm() const { return vm_; }
  // Re-evaluates which threads sample and re-arms them (.sampling).
  void ReconfigureSampling();

  // Resolves a vmtiThread argument (NULL = the current thread).
  vmtiError ResolveThread(vmtiThread handle, VMThread** out);
  // Resolves a vmtiObject handle of the current thread.
  gc::Object* ResolveObject(vmtiObject handle);
  uint64_t CollectionEpoch() const;
  gc::WeakTable& weak_table();
  // False (no collection) on a thread other than the one ending the VM once
  // it is ending: every other thread is stopped for good by then.
  bool ForceGarbageCollection();

  // RunAgentThread: starts `proc(env, arg)` on a new agent thread named
  // `name` (.agent-threads). Arguments are checked by the caller.
  vmtiError RunAgentThread(Environment* env, const char* name, vmtiStartFunction proc,
                           const void* arg, vmtiThread* thread_ptr);

  // Weak references made with NewWeakRef (no events): a handle is its weak
  // slot's id + 1 (never null), and a slot with cookie 0 is a weak
  // reference (tags.h), so the weak table alone validates handles, under
  // its one lock. A handle kept after DeleteWeakRef may name a later weak
  // reference that reuses the slot, as a JNI weak reference deleted twice
  // is undefined; it never names a tag's slot or crashes the VM.
  vmtiWeak NewWeakRef(gc::Object* obj);
  // nullopt: not a live weak reference handle.
  std::optional<bool> IsWeakRefCleared(vmtiWeak weak);
  // False: not a live weak reference handle.
  bool DeleteWeakRef(vmtiWeak weak);

  // ToolHooks.
  void OnVMInit(VMThread* main) override;
  void OnVMDeath(VMThread* current) override;
  void OnThreadStart(VMThread* thread) override;
  void OnThreadEnd(VMThread* thread) override;
  void VisitToolRoots(gc::RootVisitor& visitor) override;
  // A fresh range of `n` never-used handle tokens; returns the first.
  static uint64_t NewHandleTokens(uint64_t n);

  // gc::SampleObserver.
  gc::SamplingSettings SamplingFor(gc::Mutator* m) override;
  void OnSampledAllocation(gc::Mutator* m, gc::Value* object_root,
                           const gc::SampleDecision& decision, gc::Generation generation,
                           gc::SampleThinner& thinner) override;
  // gc::GcObserver.
  void OnGcStart() override;
  void OnGcFinish() override;
  // gc::WeakObserver.
  void OnWeakEventsFound(absl::Span<const gc::WeakEvent> events) override;
  void DeliverFoundWeakEvents() override;
  // Delivers ts.pending (.events).
  void DrainPending(AgentThreadState& ts);
  // For a thread that ends with ts.pending undelivered: VM death takes it.
  void AbandonPending(AgentThreadState& ts);

 private:
  // Calls fn(env) for each live environment of this tool, lowest slot first
  // (.dispatch).
  template <typename Fn>
  void ForEachEnvironment(Fn fn);
  // Posts a thread event (VMInit, ThreadStart, ThreadEnd: `callback` is its
  // member of vmtiEventCallbacks) about `thread` to each environment that
  // wants it, the callback in native state.
  void PostThreadEvent(vmtiEvent event, void (*vmtiEventCallbacks::*callback)(vmtiEnv*, vmtiThread),
                       VMThread* thread);
  // The live environment of this tool in pool slot `id`, or null.
  Environment* EnvironmentInSlot(int id) const;
  // Environments made so far: the next one's serial.
  uint64_t EnvironmentSerials() const { return next_serial_.load(std::memory_order_acquire); }
  void SetLive(int id, bool live);
  // Weak-event delivery (.events).
  void DeliverBatch(EventBatch& batch);
  void RegisterBatch(EventBatch* batch);
  // Unregisters; events left unclaimed (VM death began) go to orphans_.
  void UnregisterBatch(EventBatch* batch);
  std::optional<gc::WeakEvent> Claim(EventBatch& batch);
  // Handles e and whatever parked event of the same object falls due.
  void HandleWeakEvent(gc::WeakEvent e);
  void PostWeakEvent(Environment* env, gc::WeakEventKind kind, int64_t tag);
  // VM death's share (.death): everything unclaimed, delivered here.
  void DrainForDeath();
  // GarbageCollectionStart/Finish to every environment that wants it.
  void PostGcEvent(vmtiEvent event);
  // True once VM death began, on every thread but the one posting VMDeath:
  // no event may be posted there any more (.death, .agent-threads).
  bool EventsStoppedHere() const;

  vmtiVMInterface vm_functions_;
  struct VmHandle {
    const vmtiVMInterface* functions;
    ToolInterface* self;
  } vm_handle_;

  // Loaded agents with the environments each made while it started
  // (Agent_OnLoad or Agent_OnAttach), for DescribeAgents/DescribeSampling.
  // Appended by the startup and by the attach listener's thread; read there.
  struct LoadedAgent {
    size_t library;  // index in libraries_
    size_t first_env, end_env;
  };
  base::Mutex libraries_mu_;
  std::vector<LoadedAgent> loaded_ ABSL_GUARDED_BY(libraries_mu_);
  std::vector<AgentLibrary> libraries_ ABSL_GUARDED_BY(libraries_mu_);
  VM* vm_ = nullptr;
  std::atomic<vmtiPhase> phase_{VMTI_PHASE_ONLOAD};
  std::atomic<bool> dying_{false};
  // The OS thread posting VMDeath (it may be no VM thread: a signal's).
  std::atomic<std::thread::id> dying_os_thread_{};

  // This tool's live environments: bit i of word i / 64 is pool slot i.
  // Set once the slot is ready, cleared at DisposeEnvironment; words at
  // and past live_words_ are all zero.
  static constexpr int kLiveWords = EnvironmentPool::kCapacity / 64;
  std::array<std::atomic<uint64_t>, kLiveWords> live_{};
  std::atomic<int> live_words_{0};
  std::atomic<uint64_t> next_serial_{0};
  base::Mutex envs_mu_;  // serialises NewEnvironment and DisposeEnvironment

  // Weak-event delivery (.events).
  base::Mutex batches_mu_;
  std::vector<EventBatch*> batches_ ABSL_GUARDED_BY(batches_mu_);
  // Events due once VM death began, handed to the dying thread.
  std::vector<gc::WeakEvent> orphans_ ABSL_GUARDED_BY(batches_mu_);
  // Events claimed (Claim) and not yet handled, on any thread.
  std::atomic<int> events_in_hand_{0};

};

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_TOOL_INTERFACE_H_
