#include "agent_api/tool_interface.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent_api/functions.h"
#include "agent_api/raw_monitors.h"
#include "agent_api/thread_states.h"
#include "gc/check.h"
#include "gc/heap.h"
#include "vm/runtime/attach_protocol.h"
#include "vm/runtime/thread.h"
#include "vm/runtime/vm.h"

namespace minivm::agent {
namespace {

thread_local AgentThreadState tls_state;

// Tokens for vmtiObject handles: process-wide, never reused, never 0.
std::atomic<uint64_t> g_next_handle_token{1};

// Makes a handle for the duration of a callback.
class HandleScope {
 public:
  HandleScope(AgentThreadState& ts, gc::Value* slot) : ts_(ts) {
    token_ = g_next_handle_token.fetch_add(1, std::memory_order_relaxed);
    ts_.handles.push_back({token_, slot});
  }
  ~HandleScope() { ts_.handles.pop_back(); }
  HandleScope(const HandleScope&) = delete;
  HandleScope& operator=(const HandleScope&) = delete;
  vmtiObject handle() const { return reinterpret_cast<vmtiObject>(static_cast<uintptr_t>(token_)); }

 private:
  AgentThreadState& ts_;
  uint64_t token_;
};

vmtiError VmGetEnv(vmtiVM* vm, void** penv, vmtiInt version) {
  if (vm == nullptr) return VMTI_ERROR_NULL_POINTER;
  struct Handle {
    const vmtiVMInterface* functions;
    ToolInterface* self;
  };
  return reinterpret_cast<Handle*>(vm)->self->NewEnvironment(penv, version);
}

vmtiThread AsHandle(VMThread* t) { return reinterpret_cast<vmtiThread>(t); }

// Every live HeldBatch of every thread (tool_interface.h, .held).
// Never destroyed: threads' state may be torn down after static destructors.
struct HeldRegistry {
  base::Mutex mu;
  absl::flat_hash_set<AgentThreadState::HeldBatch*> batches ABSL_GUARDED_BY(mu);
};
HeldRegistry& Held() {
  static HeldRegistry* const registry = new HeldRegistry;
  return *registry;
}

}  // namespace

AgentThreadState& CurrentAgentThreadState() { return tls_state; }

AgentThreadState::~AgentThreadState() {
  ReleaseHeldBatches(*this, 0);
  // Delivered before the thread could end, normally; never left dangling.
  if (pending != nullptr) pending_tool->AbandonPending(*this);
}

void RegisterHeldBatch(AgentThreadState::HeldBatch* batch) {
  base::MutexLock lock(&Held().mu);
  Held().batches.insert(batch);
}

void UnregisterHeldBatch(AgentThreadState::HeldBatch* batch) {
  base::MutexLock lock(&Held().mu);
  Held().batches.erase(batch);
}

void ReleaseHeldBatches(AgentThreadState& ts, int callback_depth) {
  std::erase_if(ts.held, [&](const std::unique_ptr<AgentThreadState::HeldBatch>& b) {
    if (b->callback_depth < callback_depth) return false;
    UnregisterHeldBatch(b.get());
    return true;
  });
}

void ToolInterface::VisitToolRoots(gc::RootVisitor& visitor) {
  // Inside a pause: no mutator holds the lock (none polls while holding it),
  // and an agent's own thread holds it only briefly.
  base::MutexLock lock(&Held().mu);
  for (AgentThreadState::HeldBatch* b : Held().batches) {
    visitor.VisitRoots(b->slots.data(), b->slots.data() + b->slots.size());
  }
}

uint64_t ToolInterface::NewHandleTokens(uint64_t n) {
  return g_next_handle_token.fetch_add(n, std::memory_order_relaxed);
}

gc::Mutator* RequesterMutator() {
  VMThread* t = tls_state.thread;
  return t != nullptr && !t->agent_thread ? &t->mutator : nullptr;
}

bool ToolInterface::EventsStoppedHere() const {
  return dying_.load(std::memory_order_acquire) &&
         dying_os_thread_.load(std::memory_order_acquire) != std::this_thread::get_id();
}

ToolInterface::ToolInterface() {
  vm_functions_ = vmtiVMInterface{nullptr, nullptr, nullptr, &VmGetEnv};
  vm_handle_ = VmHandle{&vm_functions_, this};
}

ToolInterface::~ToolInterface() = default;

absl::Status ToolInterface::LoadAgents(const std::vector<std::string>& agent_options) {
  const std::vector<std::string> agent_dirs = AgentSearchPath();
  // Every option is checked before any agent runs: a malformed one is a bad
  // command line (InvalidArgument, exit 2), with no agent half started. A
  // library that is not found is reported only once every option has been
  // seen to be well-formed, so that the exit code does not depend on order.
  std::vector<AgentSpec> specs;
  absl::Status not_found;
  for (const std::string& option : agent_options) {
    absl::StatusOr<AgentSpec> spec = ParseAgentOption(option, agent_dirs);
    if (spec.ok()) {
      specs.push_back(*std::move(spec));
    } else if (spec.status().code() == absl::StatusCode::kInvalidArgument) {
      return spec.status();
    } else if (not_found.ok()) {
      not_found = spec.status();
    }
  }
  if (!not_found.ok()) return not_found;
  base::MutexLock lock(&libraries_mu_);
  for (const AgentSpec& spec : specs) {
    absl::StatusOr<AgentLibrary> lib = AgentLibrary::Open(spec);
    if (!lib.ok()) return lib.status();
    libraries_.push_back(*std::move(lib));
    const uint64_t first_env = EnvironmentSerials();
    absl::Status loaded = libraries_.back().Load(reinterpret_cast<vmtiVM*>(&vm_handle_));
    if (!loaded.ok()) return loaded;
    loaded_.push_back({libraries_.size() - 1, first_env, EnvironmentSerials()});
  }
  return absl::OkStatus();
}

bool ToolInterface::AttachLive(VM* vm) {
  vm_ = vm;
  phase_.store(VMTI_PHASE_LIVE, std::memory_order_release);
  if (!vm->AttachToolHooks(this)) return false;
  gc::Heap* heap = vm->heap();
  heap->SetSampleObserver(this);
  heap->SetGcObserver(this);
  heap->SetWeakObserver(this);
  return true;
}

absl::StatusOr<vmtiInt> ToolInterface::AttachAgent(const AgentSpec& spec) {
  if (phase() != VMTI_PHASE_LIVE || dying_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError("the VM is ending");
  }
  // Neither dlopen (the library's constructors) nor Agent_OnAttach runs with
  // libraries_mu_ held: VM death takes it (UnloadAgents), and an agent that
  // never returns must not keep the VM from ending. The library joins
  // libraries_ only once Agent_OnAttach has returned, so VM death skips an
  // agent still starting: no Agent_OnUnload for it, its library stays
  // mapped (nothing is ever dlclosed). Requests come one at a time from the
  // attach listener's thread, so no other load runs in between.
  absl::StatusOr<AgentLibrary> lib = AgentLibrary::Open(spec, AgentLibrary::Entry::kOnAttach);
  if (!lib.ok()) return lib.status();
  const uint64_t first_env = EnvironmentSerials();
  const vmtiInt rc = lib->Attach(reinterpret_cast<vmtiVM*>(&vm_handle_));
  const uint64_t end_env = EnvironmentSerials();
  base::MutexLock lock(&libraries_mu_);
  // A failed attach is not a loaded agent (its library stays mapped: its
  // code may have started threads before failing), but is kept with the
  // others so that its Agent_OnUnload runs at VM death.
  libraries_.push_back(*std::move(lib));
  if (rc == 0) loaded_.push_back({libraries_.size() - 1, first_env, end_env});
  return rc;
}

std::string ToolInterface::DescribeAgents() {
  base::MutexLock lock(&libraries_mu_);
  if (loaded_.empty()) return "no agents loaded\n";
  std::string out;
  for (const LoadedAgent& a : loaded_) {
    const AgentLibrary& lib = libraries_[a.library];
    // Paths and options are escaped: a newline in one would forge a line.
    absl::StrAppend(&out, attach::EscapeField(lib.spec().path),
                    lib.attached() ? " (attached)" : " (command line)");
    if (lib.spec().has_options) {
      absl::StrAppend(&out, " options '", attach::EscapeField(lib.spec().options), "'");
    }
    absl::StrAppend(&out, " environments");
    if (a.first_env == a.end_env) absl::StrAppend(&out, " none");
    // A stopped agent (heapprof's `stop`) has disposed of its environment:
    // the library stays mapped, but nothing of it is live.
    for (uint64_t serial = a.first_env; serial < a.end_env; ++serial) {
      bool live = false;
      ForEachEnvironment([&](Environment* env) {
        live = live || env->serial.load(std::memory_order_relaxed) == serial;
      });
      absl::StrAppend(&out, " ", serial, live ? "" : " (disposed)");
    }
    out += '\n';
  }
  return out;
}

std::string ToolInterface::DescribeSampling() {
  std::string out;
  if (phase() != VMTI_PHASE_LIVE) {
    return absl::StrCat("sampling: off (no agent is live); interval ", gc::kDefaultSamplingInterval,
                        " bytes\n");
  }
  // Which agent made each environment, where known.
  std::vector<std::string> owner(EnvironmentSerials());
  {
    base::MutexLock lock(&libraries_mu_);
    for (const LoadedAgent& a : loaded_) {
      for (size_t i = a.first_env; i < a.end_env && i < owner.size(); ++i) {
        owner[i] = attach::EscapeField(libraries_[a.library].spec().path);
      }
    }
  }
  std::string sampling;
  int32_t finest = -1;
  ForEachEnvironment([&](Environment* env) {
    const uint64_t i = env->serial.load(std::memory_order_relaxed);
    if (i >= owner.size()) return;  // made after this began
    if (!HasCapabilityFor(env->Capabilities(), VMTI_EVENT_SAMPLED_OBJECT_ALLOC)) return;
    bool per_thread = false;
    {
      base::MutexLock lock(&env->mu);
      for (const auto& [thread, bits] : env->thread_events) {
        per_thread = per_thread || (bits & EventBit(VMTI_EVENT_SAMPLED_OBJECT_ALLOC)) != 0;
      }
    }
    const bool global =
        (env->global_events.load() & EventBit(VMTI_EVENT_SAMPLED_OBJECT_ALLOC)) != 0;
    if (!global && !per_thread) return;
    const int32_t interval = env->interval.load(std::memory_order_relaxed);
    finest = finest < 0 ? interval : std::min(finest, interval);
    absl::StrAppend(&sampling, "  environment ", i, owner[i].empty() ? "" : " (", owner[i],
                    owner[i].empty() ? "" : ")", global ? ": every thread" : ": some threads",
                    ", interval ", interval, " bytes\n");
  });
  if (sampling.empty()) {
    absl::StrAppend(&out, "sampling: no environment samples\n");
  } else {
    absl::StrAppend(&out, "sampling: interval ", finest, " bytes (the finest asked for); sampled by:\n",
                    sampling);
  }
  return out;
}

void ToolInterface::AttachVm(VM* vm) {
  vm_ = vm;
  vm->SetToolHooks(this);
  gc::Heap* heap = vm->heap();
  heap->SetSampleObserver(this);
  heap->SetGcObserver(this);
  heap->SetWeakObserver(this);
}

void ToolInterface::UnloadAgents() {
  // An agent whose Agent_OnAttach is still running is not in libraries_
  // (AttachAgent): it gets no Agent_OnUnload.
  base::MutexLock lock(&libraries_mu_);
  for (AgentLibrary& lib : libraries_) lib.Unload(reinterpret_cast<vmtiVM*>(&vm_handle_));
}

vmtiError ToolInterface::NewEnvironment(void** penv, vmtiInt version) {
  if (penv == nullptr) return VMTI_ERROR_NULL_POINTER;
  // Accept VMTI_VERSION_1 and any 1.x minor version; nothing else.
  if ((static_cast<uint32_t>(version) & 0xFFFF0000u) != VMTI_VERSION_1) {
    *penv = nullptr;
    return VMTI_ERROR_UNSUPPORTED_VERSION;
  }
  if (phase() == VMTI_PHASE_DEAD) return VMTI_ERROR_WRONG_PHASE;
  base::MutexLock lock(&envs_mu_);
  const uint64_t serial = next_serial_.load(std::memory_order_relaxed);
  Environment* env = EnvironmentPool::Get().Acquire(this, serial);
  // kCapacity environments alive (or disposed with events still to handle).
  if (env == nullptr) return VMTI_ERROR_OUT_OF_MEMORY;
  next_serial_.store(serial + 1, std::memory_order_release);
  SetLive(env->id, true);
  *penv = env->AsVmti();
  return VMTI_ERROR_NONE;
}

void ToolInterface::DisposeEnvironment(Environment* env) {
  {
    base::MutexLock lock(&env->mu);
    env->capabilities = vmtiCapabilities{};
    env->callbacks = vmtiEventCallbacks{};
    env->thread_events.clear();
    env->ThreadEventsChangedLocked();
    env->CapabilitiesChangedLocked();
  }
  env->global_events.store(0);
  env->disposed.store(true, std::memory_order_release);
  {
    base::MutexLock lock(&envs_mu_);
    SetLive(env->id, false);
  }
  // Its tags go now; an event already on its way about one of its objects
  // is dropped when handled (tags.h, .record.reuse). Tags exist only once
  // the VM does.
  if (vm_ != nullptr) env->tags.ClearAll(weak_table());
  ReconfigureSampling();
  EnvironmentPool::Get().Release(env);
}

void ToolInterface::SetLive(int id, bool live) {
  const uint64_t bit = uint64_t{1} << (id % 64);
  if (live) {
    live_[id / 64].fetch_or(bit, std::memory_order_release);
    if (live_words_.load(std::memory_order_relaxed) <= id / 64) {
      live_words_.store(id / 64 + 1, std::memory_order_release);
    }
  } else {
    live_[id / 64].fetch_and(~bit, std::memory_order_release);
  }
}

template <typename Fn>
void ToolInterface::ForEachEnvironment(Fn fn) {
  EnvironmentPool& pool = EnvironmentPool::Get();
  for (int w = 0, n = live_words_.load(std::memory_order_acquire); w < n; ++w) {
    for (uint64_t bits = live_[w].load(std::memory_order_acquire); bits != 0; bits &= bits - 1) {
      fn(pool.At(w * 64 + __builtin_ctzll(bits)));
    }
  }
}

Environment* ToolInterface::EnvironmentInSlot(int id) const {
  Environment* env = EnvironmentPool::Get().At(id);
  return env != nullptr && env->tool == this ? env : nullptr;
}

gc::SamplingSettings ToolInterface::SamplingFor(gc::Mutator* m) {
  gc::SamplingSettings settings;
  if (phase() != VMTI_PHASE_LIVE) return settings;
  const VMThread* thread = VMThread::FromMutator(m);
  ForEachEnvironment([&](Environment* env) {
    if (!env->ShouldPost(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, thread)) return;
    const int32_t interval = env->interval.load(std::memory_order_relaxed);
    settings.interval = settings.enabled ? std::min(settings.interval, interval) : interval;
    settings.enabled = true;
  });
  return settings;
}

void ToolInterface::ReconfigureSampling() {
  if (phase() != VMTI_PHASE_LIVE || vm_ == nullptr) return;  // applied at VMInit
  if (dying_.load(std::memory_order_acquire)) return;        // .death
  // No lock here: a mutator waiting on a mutex could neither poll nor count
  // as blocked, and would stall the safepoint. Concurrent calls serialise in
  // the safepoint protocol, and each evaluates the settings current then.
  vm_->heap()->ReconfigureSampling(RequesterMutator());
}

vmtiError ToolInterface::ResolveThread(vmtiThread handle, VMThread** out) {
  VMThread* current = CurrentAgentThreadState().thread;
  if (handle == nullptr) {
    if (current == nullptr) return VMTI_ERROR_INVALID_THREAD;  // a native thread
    *out = current;
    return VMTI_ERROR_NONE;
  }
  bool alive = false;
  VMThread* t = vm_->FindThread(handle, &alive);
  if (t == nullptr) return VMTI_ERROR_INVALID_THREAD;
  if (!alive) return VMTI_ERROR_THREAD_NOT_ALIVE;
  *out = t;
  return VMTI_ERROR_NONE;
}

gc::Object* ToolInterface::ResolveObject(vmtiObject handle) {
  // The slot is updated by collections: read it in the VM state only
  // (VMTI_IN_VM in functions.cc), and use the address only inside it.
  MINIVM_GC_DCHECK(InVmState(), "an object handle resolved in native state");
  const AgentThreadState& ts = CurrentAgentThreadState();
  const auto token = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
  for (const AgentThreadState::Handle& h : ts.handles) {
    if (h.token == token) return h.slot->IsRef() ? h.slot->AsRef() : nullptr;
  }
  for (const auto& b : ts.held) {
    if (token - b->first_token < b->slots.size()) {
      const gc::Value v = b->slots[token - b->first_token];
      return v.IsRef() ? v.AsRef() : nullptr;
    }
  }
  return nullptr;
}

uint64_t ToolInterface::CollectionEpoch() const { return vm_->heap()->CollectionCount(); }

gc::WeakTable& ToolInterface::weak_table() { return vm_->heap()->weak_table(); }

bool ToolInterface::ForceGarbageCollection() {
  // Told apart by OS thread: when the dying thread is not a VM thread (a
  // signal's shutdown), native threads have no VMThread either.
  if (EventsStoppedHere()) return false;
  return vm_->heap()->CollectGarbage(RequesterMutator(), gc::GcCause::kExplicit);
}

vmtiWeak ToolInterface::NewWeakRef(gc::Object* obj) {
  const gc::WeakSlotId id = weak_table().Create(obj, 0);
  return reinterpret_cast<vmtiWeak>(static_cast<uintptr_t>(id) + 1);
}

namespace {
// The slot a handle names, or a value no slot has (ids are 32 bits).
gc::WeakSlotId WeakSlotOf(vmtiWeak weak) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(weak);
  return v == 0 || v - 1 > UINT32_MAX - 1 ? UINT32_MAX : static_cast<gc::WeakSlotId>(v - 1);
}
}  // namespace

std::optional<bool> ToolInterface::IsWeakRefCleared(vmtiWeak weak) {
  switch (weak_table().Find(WeakSlotOf(weak), 0)) {
    case gc::WeakTable::Lookup::kAbsent:
      return std::nullopt;
    case gc::WeakTable::Lookup::kDied:
      return true;
    case gc::WeakTable::Lookup::kLive:
      return false;
  }
  return std::nullopt;
}

bool ToolInterface::DeleteWeakRef(vmtiWeak weak) {
  return weak_table().TryDelete(WeakSlotOf(weak), 0);
}

// ---- Lifecycle events --------------------------------------------------

void ToolInterface::OnVMInit(VMThread* main) {
  CurrentAgentThreadState().thread = main;
  phase_.store(VMTI_PHASE_LIVE, std::memory_order_release);
  ReconfigureSampling();
  PostThreadEvent(VMTI_EVENT_VM_INIT, &vmtiEventCallbacks::VMInit, main);
}

void ToolInterface::PostThreadEvent(vmtiEvent event,
                                    void (*vmtiEventCallbacks::*callback)(vmtiEnv*, vmtiThread),
                                    VMThread* thread) {
  ForEachEnvironment([&](Environment* env) {
    if (!env->ShouldPost(event, thread)) return;
    CallbackScope scope(CurrentAgentThreadState());
    if (auto cb = env->Callbacks().*callback) {
      NativeScope native;
      cb(env->AsVmti(), AsHandle(thread));
    }
  });
}

void ToolInterface::OnVMDeath(VMThread* current) {
  AgentThreadState& ts = CurrentAgentThreadState();
  if (current != nullptr) ts.thread = current;
  {
    // Under the batches' lock: from here on no other thread claims an event
    // (Claim), so DrainForDeath sees every unclaimed one.
    base::MutexLock lock(&batches_mu_);
    dying_os_thread_.store(std::this_thread::get_id(), std::memory_order_release);
    dying_.store(true, std::memory_order_release);
  }
  // Agent threads waiting on raw monitors learn that the VM is ending
  // (VMTI_ERROR_INTERRUPT) and may leave; VMDeath does not wait for them.
  InterruptAgentThreadWaits();
  // The dying thread owns the permanent stop (or is no VM thread): the
  // scope changes nothing for the collector, but the callbacks run in the
  // same state as every other callback (thread_states.h .callbacks-native).
  NativeScope native;
  if (phase() == VMTI_PHASE_LIVE) DrainForDeath();
  ts.in_vm_death = true;
  ForEachEnvironment([&](Environment* env) {
    if (!env->ShouldPost(VMTI_EVENT_VM_DEATH, current)) return;
    CallbackScope scope(ts);
    if (auto cb = env->Callbacks().VMDeath) cb(env->AsVmti());
  });
  ts.in_vm_death = false;
  phase_.store(VMTI_PHASE_DEAD, std::memory_order_release);
  // The process ends right after this; agents get their last word now.
  UnloadAgents();
}

void ToolInterface::OnThreadStart(VMThread* thread) {
  CurrentAgentThreadState().thread = thread;
  if (phase() != VMTI_PHASE_LIVE || EventsStoppedHere()) return;
  PostThreadEvent(VMTI_EVENT_THREAD_START, &vmtiEventCallbacks::ThreadStart, thread);
}

void ToolInterface::OnThreadEnd(VMThread* thread) {
  // Set here too: a thread that started before an agent attached never saw
  // OnThreadStart.
  CurrentAgentThreadState().thread = thread;
  if (phase() == VMTI_PHASE_LIVE && !EventsStoppedHere()) {
    PostThreadEvent(VMTI_EVENT_THREAD_END, &vmtiEventCallbacks::ThreadEnd, thread);
  }
  // Per-thread enables die with the thread (its address may be reused).
  ForEachEnvironment([&](Environment* env) {
    base::MutexLock lock(&env->mu);
    if (env->thread_events.erase(thread) != 0) env->ThreadEventsChangedLocked();
  });
}

void ToolInterface::OnSampledAllocation(gc::Mutator* m, gc::Value* object_root,
                                        const gc::SampleDecision& decision,
                                        gc::Generation generation, gc::SampleThinner& thinner) {
  if (phase() != VMTI_PHASE_LIVE) return;
  VMThread* thread = VMThread::FromMutator(m);
  AgentThreadState& ts = CurrentAgentThreadState();
  ts.thread = thread;
  const gc::SampleDecision* outer_sample = ts.sample;
  const gc::Generation outer_generation = ts.sample_generation;
  ts.sample_generation = generation;
  HandleScope scope(ts, object_root);
  // An environment a callback makes meanwhile does not get this allocation:
  // it was reported before that environment existed.
  const uint64_t serials = EnvironmentSerials();
  ForEachEnvironment([&](Environment* env) {
    if (env->serial.load(std::memory_order_relaxed) >= serials) return;
    if (!env->ShouldPost(VMTI_EVENT_SAMPLED_OBJECT_ALLOC, thread)) return;
    auto cb = env->Callbacks().SampledObjectAlloc;
    if (cb == nullptr || !object_root->IsRef()) return;
    // Read in the VM state, for each env: an earlier callback may have let
    // a collection move the object. Only the handle crosses into native.
    const gc::Object* obj = object_root->AsRef();
    const auto klass = reinterpret_cast<vmtiClass>(const_cast<gc::ClassLayout*>(obj->klass));
    const size_t size = obj->Size();
    // This environment's own process (.interval): the sample thinned to its
    // interval, which may leave it no point in this object.
    const gc::SampleDecision mine =
        thinner.Thin(decision, size, env->interval.load(std::memory_order_relaxed));
    if (mine.sample_count == 0) return;
    ts.sample = &mine;
    CallbackScope callback_scope(ts);
    NativeScope native;
    cb(env->AsVmti(), AsHandle(thread), scope.handle(), klass, static_cast<vmtiLong>(size));
    ts.sample = outer_sample;  // `mine` ends with this iteration
  });
  ts.sample = outer_sample;
  ts.sample_generation = outer_generation;
}

void ToolInterface::PostGcEvent(vmtiEvent event) {
  if (phase() != VMTI_PHASE_LIVE) return;
  AgentThreadState& ts = CurrentAgentThreadState();
  ++ts.restricted_depth;  // inside the pause: only raw bookkeeping is allowed
  ForEachEnvironment([&](Environment* env) {
    if (!env->ShouldPost(event, ts.thread)) return;
    const vmtiEventCallbacks cb = env->Callbacks();
    auto fn = event == VMTI_EVENT_GARBAGE_COLLECTION_START ? cb.GarbageCollectionStart
                                                           : cb.GarbageCollectionFinish;
    if (fn != nullptr) fn(env->AsVmti());
  });
  --ts.restricted_depth;
}

void ToolInterface::OnGcStart() { PostGcEvent(VMTI_EVENT_GARBAGE_COLLECTION_START); }

void ToolInterface::OnGcFinish() { PostGcEvent(VMTI_EVENT_GARBAGE_COLLECTION_FINISH); }

// ---- ObjectPromote and ObjectFree (.events) -----------------------------

void DeliverPendingWeakEvents(AgentThreadState& ts) { ts.pending_tool->DrainPending(ts); }

void ToolInterface::OnWeakEventsFound(absl::Span<const gc::WeakEvent> events) {
  // Inside the pause: only bookkeeping (gc::WeakObserver's contract).
  AgentThreadState& ts = CurrentAgentThreadState();
  if (ts.pending == nullptr) {
    ts.pending = std::make_unique<EventBatch>();
    ts.pending_tool = this;
    RegisterBatch(ts.pending.get());
  }
  base::MutexLock lock(&batches_mu_);
  for (const gc::WeakEvent& e : events) {
    if (e.cookie != 0 && e.kind != gc::WeakEventKind::kMoved) ts.pending->events.push_back(e);
  }
}

void ToolInterface::DeliverFoundWeakEvents() {
  AgentThreadState& ts = CurrentAgentThreadState();
  if (ts.pending == nullptr || ts.draining) return;  // a drain further up takes them
  // Inside a callback: when the outermost one returns (CallbackScope).
  if (ts.callback_depth > 0 && !ts.in_vm_death) return;
  DrainPending(ts);
}

void ToolInterface::DrainPending(AgentThreadState& ts) {
  ts.draining = true;
  // Callbacks of this drain may find more events (a collection one forced)
  // in the same batch: DeliverBatch claims them too, in order.
  DeliverBatch(*ts.pending);
  UnregisterBatch(ts.pending.get());
  ts.pending.reset();
  ts.draining = false;
}

void ToolInterface::AbandonPending(AgentThreadState& ts) {
  UnregisterBatch(ts.pending.get());
  ts.pending.reset();
}

void ToolInterface::RegisterBatch(EventBatch* batch) {
  base::MutexLock lock(&batches_mu_);
  batches_.push_back(batch);
}

void ToolInterface::UnregisterBatch(EventBatch* batch) {
  base::MutexLock lock(&batches_mu_);
  std::erase(batches_, batch);
  for (size_t i = batch->next; i < batch->events.size(); ++i) orphans_.push_back(batch->events[i]);
  batch->next = batch->events.size();
}

std::optional<gc::WeakEvent> ToolInterface::Claim(EventBatch& batch) {
  base::MutexLock lock(&batches_mu_);
  if (EventsStoppedHere() || batch.next == batch.events.size()) return std::nullopt;
  // In hand from here until DeliverBatch has handled it: VM death waits for
  // it (DrainForDeath), since nothing else can see it any more.
  events_in_hand_.fetch_add(1, std::memory_order_acq_rel);
  return batch.events[batch.next++];
}

void ToolInterface::DeliverBatch(EventBatch& batch) {
  // Native throughout: handling an event touches no object address (tags.h,
  // .epoch), so a collection may run meanwhile, and a thread stopped for
  // good at VM death is never stopped in the middle of a batch.
  NativeScope native;
  while (std::optional<gc::WeakEvent> e = Claim(batch)) {
    HandleWeakEvent(*e);
    events_in_hand_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ToolInterface::HandleWeakEvent(gc::WeakEvent e) {
  for (;;) {
    // A slot is never recycled while its environment's tags have events to
    // handle, so this is the environment that tagged the object, disposed
    // or not (environment.h, .pool.slot).
    Environment* env = EnvironmentInSlot(CookieEnv(e.cookie));
    if (env == nullptr) return;
    int64_t tag = 0;
    const TagMap::Action action = env->tags.Begin(e, weak_table(), &tag);
    if (action == TagMap::Action::kParked) return;
    if (action == TagMap::Action::kPost) PostWeakEvent(env, e.kind, tag);
    std::optional<gc::WeakEvent> next = env->tags.End(e);
    if (!next) return;
    if (EventsStoppedHere()) {  // VM death began: the dying thread delivers it
      base::MutexLock lock(&batches_mu_);
      orphans_.push_back(*next);
      return;
    }
    e = *next;
  }
}

void ToolInterface::PostWeakEvent(Environment* env, gc::WeakEventKind kind, int64_t tag) {
  if (phase() != VMTI_PHASE_LIVE || env->disposed.load(std::memory_order_acquire)) return;
  AgentThreadState& ts = CurrentAgentThreadState();
  const vmtiEvent event =
      kind == gc::WeakEventKind::kPromoted ? VMTI_EVENT_OBJECT_PROMOTE : VMTI_EVENT_OBJECT_FREE;
  if (!env->ShouldPost(event, ts.thread)) return;
  const vmtiEventCallbacks callbacks = env->Callbacks();
  CallbackScope scope(ts);
  NativeScope native;
  if (event == VMTI_EVENT_OBJECT_PROMOTE) {
    if (callbacks.ObjectPromote != nullptr) callbacks.ObjectPromote(env->AsVmti(), tag);
  } else if (callbacks.ObjectFree != nullptr) {
    callbacks.ObjectFree(env->AsVmti(), tag);
  }
}

void ToolInterface::DrainForDeath() {
  auto take = [&] {
    std::vector<gc::WeakEvent> out;
    base::MutexLock lock(&batches_mu_);
    for (EventBatch* b : batches_) {
      for (; b->next < b->events.size(); ++b->next) out.push_back(b->events[b->next]);
    }
    out.insert(out.end(), orphans_.begin(), orphans_.end());
    orphans_.clear();
    return out;
  };
  for (const gc::WeakEvent& e : take()) HandleWeakEvent(e);
  // Events other threads claimed before VM death began are theirs to
  // deliver (a callback may be running), and they hand over what falls due
  // after them (HandleWeakEvent's orphans); a blocked one is waited for only
  // so long.
  const absl::Time deadline = absl::Now() + kDeathDrainWait;
  while (events_in_hand_.load(std::memory_order_acquire) > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  for (const gc::WeakEvent& e : take()) HandleWeakEvent(e);
}

}  // namespace minivm::agent
