#include "agent.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

namespace agent {

namespace {

// Every instance Install saw, never freed (instances live until the process
// ends): a root that keeps them reachable for leak checkers (LeakSanitizer)
// when a host frees its environments at exit.
void KeepForever(void* instance) {
  static std::mutex* mu = new std::mutex;
  static std::vector<void*>* kept = new std::vector<void*>;
  std::lock_guard<std::mutex> g(*mu);
  kept->push_back(instance);
}

}  // namespace

void Setup::NotGlobally(vmtiEvent event) {
  events.erase(std::remove(events.begin(), events.end(), event), events.end());
}

vmtiEnv* NewEnvironment(vmtiVM* vm, const char* agent) {
  vmtiEnv* env = nullptr;
  const vmtiError err = (*vm)->GetEnv(vm, reinterpret_cast<void**>(&env), VMTI_VERSION_1);
  if (err != VMTI_ERROR_NONE || env == nullptr) {
    std::fprintf(stderr, "%s: GetEnv failed: error %d\n", agent, static_cast<int>(err));
    return nullptr;
  }
  return env;
}

bool Install(vmtiEnv* env, void* instance, const Setup& setup, ErrorLog* log) {
  KeepForever(instance);
  if (!log->Check(env, (*env)->SetEnvironmentLocalStorage(env, instance),
                  "SetEnvironmentLocalStorage") ||
      !log->Check(env, (*env)->AddCapabilities(env, &setup.capabilities), "AddCapabilities") ||
      !log->Check(env,
                  (*env)->SetEventCallbacks(env, &setup.callbacks,
                                            static_cast<vmtiInt>(sizeof setup.callbacks)),
                  "SetEventCallbacks")) {
    return false;
  }
  if (setup.interval >= 0 &&
      !log->Check(env, (*env)->SetHeapSamplingInterval(env, static_cast<vmtiInt>(setup.interval)),
                  "SetHeapSamplingInterval")) {
    return false;
  }
  for (vmtiEvent e : setup.events) {
    if (!log->Check(env, (*env)->SetEventNotificationMode(env, VMTI_ENABLE, e, nullptr),
                    "SetEventNotificationMode")) {
      return false;
    }
  }
  return true;
}

}  // namespace agent
