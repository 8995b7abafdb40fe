// The tool agents' common skeleton: one instance per environment.
//
// An agent library can be loaded more than once into one VM (JVMTI allows
// it, and dlopen hands the second load the same library, globals and all):
// `--heap-profile=a.pb.gz -agentlib:heapprof=top=1` is two heapprofs. So no
// agent keeps per-instance state in globals. Each Agent_OnLoad makes its own
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

#include <vector>

#include "sites.h"
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

// What an agent asks of its environment at load.
struct Setup {
  vmtiCapabilities capabilities{};
  vmtiEventCallbacks callbacks{};
  // Enabled for every thread. A vector, not an initializer_list, so that
  // `setup.events = {...};` does not leave it pointing at a dead array.
  std::vector<vmtiEvent> events;
  int64_t interval = -1;  // SetHeapSamplingInterval unless < 0
};

// Stores `instance` in env's local storage, then adds the capabilities, sets
// the callbacks and the interval and enables the events, in that order (so
// no callback can run before its instance is reachable). Failures are
// logged through `log`; returns false on the first.
bool Install(vmtiEnv* env, void* instance, const Setup& setup, ErrorLog* log);

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_AGENT_H_
