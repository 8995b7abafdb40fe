// The tool agents' common skeleton: one Agent_OnLoad (Start), one instance
// per environment.
//
// An agent library can be loaded more than once into one VM (JVMTI allows
// it, and dlopen hands the second load the same library, globals and all):
// `--heap-profile=a.pb.gz -agentlib:heapprof=top=1` is two heapprofs. So no
// agent keeps per-instance state in globals. Each load makes its own
// instance and its own environment, stores the instance in the
// environment's local storage, and every callback finds its instance there
// (Callback<>, below). Two instances are two independent tools with their
// own options, tags, tables and outputs; what they share is what the VM
// shares (the sampling interval: the last to set it wins).
//
// Instances live until the process ends: the VM sends no event after
// VMDeath, but a library may stay mapped and a late callback on another
// thread must never find freed memory. Install keeps a pointer to each, so
// that leak checkers see them as reachable.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_AGENT_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_AGENT_H_

#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "errors.h"
#include "options.h"
#include "vmti/vmti.h"

namespace agent {

// The instance stored in env's local storage, or null.
template <typename T>
T* InstanceOf(vmtiEnv* env) {
  void* data = nullptr;
  if ((*env)->GetEnvironmentLocalStorage(env, &data) != VMTI_ERROR_NONE) return nullptr;
  return static_cast<T*>(data);
}

// Callback<&T::OnX>::Fn is a C event callback that calls
// instance->OnX(env, args...) on the environment's instance, with no C++
// exception unwinding into the VM (Guard). T::kName names the agent in
// reports. Usage: callbacks.ObjectFree = &Callback<&Checker::OnObjectFree>::Fn;
template <auto kMethod>
struct Callback;
template <typename T, typename... Args, void (T::*kMethod)(vmtiEnv*, Args...)>
struct Callback<kMethod> {
  static void Fn(vmtiEnv* env, Args... args) {
    T* self = InstanceOf<T>(env);
    if (self == nullptr) return;
    Guard(T::kName, "an event callback", [&] { (self->*kMethod)(env, args...); });
  }
};

// A new environment for one instance; prints "<agent>: GetEnv failed: ..."
// and returns null on failure.
vmtiEnv* NewEnvironment(vmtiVM* vm, const char* agent);

// What an agent asks of its environment.
struct Setup {
  vmtiCapabilities capabilities{};
  vmtiEventCallbacks callbacks{};
  // Enabled for every thread. A vector, not an initializer_list, so that
  // `setup.events = {...};` does not leave it pointing at a dead array.
  std::vector<vmtiEvent> events;
  int64_t interval = -1;  // SetHeapSamplingInterval unless < 0

  // Leaves `event` out of `events`: its callback stays set, for the agent to
  // enable per thread (threads=) or not at all.
  void NotGlobally(vmtiEvent event);
};

// Stores `instance` in env's local storage, then adds the capabilities, sets
// the callbacks and the interval and enables the events, in that order (so
// no callback can run before its instance is reachable). Failures are
// logged through `log`; returns false on the first.
bool Install(vmtiEnv* env, void* instance, const Setup& setup, ErrorLog* log);

// Has<Handler><T>: whether T declares a public member of that name.
#define MINIVM_AGENT_HANDLER_TRAIT(Handler)                             \
  template <typename T, typename = void>                                \
  struct Has##Handler : std::false_type {};                             \
  template <typename T>                                                 \
  struct Has##Handler<T, std::void_t<decltype(&T::Handler)>> : std::true_type {};
MINIVM_AGENT_HANDLER_TRAIT(OnStart)
MINIVM_AGENT_HANDLER_TRAIT(OnVMDeath)
MINIVM_AGENT_HANDLER_TRAIT(OnThreadStart)
MINIVM_AGENT_HANDLER_TRAIT(OnGcFinish)
MINIVM_AGENT_HANDLER_TRAIT(OnObjectFree)
MINIVM_AGENT_HANDLER_TRAIT(OnObjectPromote)
MINIVM_AGENT_HANDLER_TRAIT(OnSample)
#undef MINIVM_AGENT_HANDLER_TRAIT

// HandlersOf's step: callback `slot` calls kMethod, and `event` is enabled.
template <auto kMethod, typename Fn>
void Handle(Setup* s, Fn vmtiEventCallbacks::*slot, vmtiEvent event) {
  s->callbacks.*slot = &Callback<kMethod>::Fn;
  s->events.push_back(event);
}

// The Setup of an instance class T from the event handlers it declares
// (public members, by these names): each one's callback is set, the
// capabilities its event needs are added, and its event is enabled for
// every thread.
//   OnStart(env, thread)             VMInit (see Start)
//   OnVMDeath(env)                   VMDeath
//   OnThreadStart(env, thread)       ThreadStart
//   OnGcFinish(env)                  GarbageCollectionFinish
//   OnObjectFree(env, tag)           ObjectFree, of the objects T tagged
//   OnObjectPromote(env, tag)        ObjectPromote, likewise
//   OnSample(env, thread, object, klass, size)   SampledObjectAlloc
// SampledObjectAlloc comes last in `events`, so that when an agent starts
// while the program runs, no sampled object can die before its ObjectFree
// is enabled.
template <typename T>
Setup HandlersOf() {
  Setup s;
  vmtiCapabilities& caps = s.capabilities;
  using C = vmtiEventCallbacks;
  if constexpr (HasOnStart<T>::value) Handle<&T::OnStart>(&s, &C::VMInit, VMTI_EVENT_VM_INIT);
  if constexpr (HasOnVMDeath<T>::value) Handle<&T::OnVMDeath>(&s, &C::VMDeath, VMTI_EVENT_VM_DEATH);
  if constexpr (HasOnThreadStart<T>::value) {
    Handle<&T::OnThreadStart>(&s, &C::ThreadStart, VMTI_EVENT_THREAD_START);
  }
  if constexpr (HasOnGcFinish<T>::value) {
    caps.can_generate_garbage_collection_events = 1;
    Handle<&T::OnGcFinish>(&s, &C::GarbageCollectionFinish, VMTI_EVENT_GARBAGE_COLLECTION_FINISH);
  }
  if constexpr (HasOnObjectFree<T>::value) {
    caps.can_tag_objects = caps.can_generate_object_free_events = 1;
    Handle<&T::OnObjectFree>(&s, &C::ObjectFree, VMTI_EVENT_OBJECT_FREE);
  }
  if constexpr (HasOnObjectPromote<T>::value) {
    caps.can_tag_objects = caps.can_generate_object_promote_events = 1;
    Handle<&T::OnObjectPromote>(&s, &C::ObjectPromote, VMTI_EVENT_OBJECT_PROMOTE);
  }
  if constexpr (HasOnSample<T>::value) {
    caps.can_generate_sampled_alloc_events = 1;
    Handle<&T::OnSample>(&s, &C::SampledObjectAlloc, VMTI_EVENT_SAMPLED_OBJECT_ALLOC);
  }
  return s;
}

// The one Agent_OnLoad of the tool agents:
//
//   VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void*) {
//     return agent::Start<leakcheck::Checker>(vm, options);
//   }
//
// T, the agent's instance class, provides
//   static constexpr const char* kName;     the agent's name, in every line
//   struct Config;                          default-constructed: the defaults
//   static void DeclareOptions(Config*, OptionParser*);
//   static std::unique_ptr<T> Create(Config, vmtiVM*, vmtiEnv*);
//       what may fail once the options parse (outputs, connections, checks
//       that involve several options; the vm, for an agent that needs a
//       second environment); null after one line on stderr
//   void Configure(Setup*) const;           the interval, events per thread
//   ErrorLog& log();
// and its event handlers (HandlersOf, above), among them, if it has work to
// do once the VM runs (threads to start, the main thread to look at),
// OnStart.
//
// Start parses the options (OptionParser: one line and exit code 1 for a
// bad one), makes the environment and the instance, and installs it. With
// HandlersOf it is the one place that knows when the VM starts: OnStart
// runs at VMInit, on the main thread. That is all that depends on the
// phase, so an entry point for an agent loaded into a VM that is already
// running (Agent_OnAttach, the LIVE phase) belongs here too, beside this
// one, and runs OnStart at once.
// Has MarkAttached: the instance wants to know it was made by Agent_OnAttach
// (heapprof says so in its profiles).
template <typename T, typename = void>
struct HasMarkAttached : std::false_type {};
template <typename T>
struct HasMarkAttached<T, std::void_t<decltype(&T::MarkAttached)>> : std::true_type {};

// Start and Attach (below). `live`: the VM runs already. *out, if given,
// receives the instance once installed.
template <typename T>
vmtiInt StartInstance(vmtiVM* vm, const char* options, bool live, T** out) {
  typename T::Config config;
  OptionParser parser(T::kName);
  T::DeclareOptions(&config, &parser);
  if (!parser.ParseOrReport(options)) return 1;
  vmtiEnv* env = NewEnvironment(vm, T::kName);
  if (env == nullptr) return 1;
  std::unique_ptr<T> made = T::Create(std::move(config), vm, env);
  if (made == nullptr) {
    (*env)->DisposeEnvironment(env);
    return 1;
  }
  Setup setup = HandlersOf<T>();
  made->Configure(&setup);
  if constexpr (HasMarkAttached<T>::value) {
    if (live) made->MarkAttached();  // before any callback can run
  }
  // The instance lives until the process ends (above), even if Install
  // fails after its environment could already reach it.
  T* instance = made.release();
  if (!Install(env, instance, setup, &instance->log())) return 1;
  if (live) {
    // No VMInit and no ThreadStart for the threads already running: an
    // instance that wants ThreadStart (threads=) sees each of them now, then
    // OnStart runs with no main thread (it was among them).
    bool wants_thread_start = false;
    for (vmtiEvent e : setup.events) wants_thread_start |= e == VMTI_EVENT_THREAD_START;
    if constexpr (HasOnThreadStart<T>::value) {
      vmtiInt n = 0;
      vmtiThread* threads = nullptr;
      if (wants_thread_start &&
          instance->log().Check(env, (*env)->GetAllThreads(env, &n, &threads), "GetAllThreads")) {
        for (vmtiInt i = 0; i < n; ++i) {
          Guard(T::kName, "ThreadStart at attach", [&] { instance->OnThreadStart(env, threads[i]); });
        }
        (*env)->Deallocate(env, reinterpret_cast<unsigned char*>(threads));
      }
    }
    if constexpr (HasOnStart<T>::value) {
      Guard(T::kName, "the start at attach", [&] { instance->OnStart(env, nullptr); });
    }
  }
  if (out != nullptr) *out = instance;
  return 0;
}

template <typename T>
vmtiInt Start(vmtiVM* vm, const char* options) {
  return StartInstance<T>(vm, options, /*live=*/false, nullptr);
}

// The one Agent_OnAttach (minivm-attach PID load NAME=OPTIONS, docs/attach.md):
// Start in a VM that runs already (phase LIVE), where no VMInit comes. The
// threads already running go to OnThreadStart if the instance enabled
// ThreadStart (threads=), then OnStart runs at once, on the attaching
// thread, with a null main thread. An instance class with MarkAttached()
// has it called before it is installed.
//
//   VMTI_EXPORT vmtiInt Agent_OnAttach(vmtiVM* vm, char* options, void*) {
//     return agent::Attach<leakcheck::Checker>(vm, options);
//   }
template <typename T>
vmtiInt Attach(vmtiVM* vm, const char* options, T** out = nullptr) {
  return StartInstance<T>(vm, options, /*live=*/true, out);
}

}  // namespace agent

// The two entry points of an agent whose load and attach are plain Start and
// Attach of its instance class T (leakcheck, lifetimes, remote; heapprof's
// Agent_OnAttach also takes actions, so it writes its own):
//
//   MINIVM_AGENT_ENTRY_POINTS(leakcheck::Checker)
//
// at file scope, after T is defined.
#define MINIVM_AGENT_ENTRY_POINTS(T)                                     \
  VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void*) {   \
    return ::agent::Start<T>(vm, options);                               \
  }                                                                      \
  VMTI_EXPORT vmtiInt Agent_OnAttach(vmtiVM* vm, char* options, void*) { \
    return ::agent::Attach<T>(vm, options);                              \
  }

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_AGENT_H_
