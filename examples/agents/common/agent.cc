#include "agent.h"

#include <cstdio>

namespace agent {

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
