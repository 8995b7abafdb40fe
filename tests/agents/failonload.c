/*
 * failonload: Agent_OnLoad returns non-zero (1, or code=N from the
 * options) after registering callbacks. The VM must stop before the program
 * starts, with exit code 1 and a one-line stderr message naming the agent;
 * no VMInit may be delivered (it would print a FAIL line to stdout).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmti/vmti.h"

static void on_init(vmtiEnv* env, vmtiThread thread) {
  (void)env;
  (void)thread;
  printf("FAIL failonload: VMInit after a failed Agent_OnLoad\n");
  fflush(stdout);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  vmtiEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, VMTI_VERSION_1) == VMTI_ERROR_NONE) {
    vmtiEventCallbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.VMInit = on_init;
    (*env)->SetEventCallbacks(env, &cb, (vmtiInt)sizeof cb);
    (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_VM_INIT, NULL);
  }
  if (options && !strncmp(options, "code=", 5)) return (vmtiInt)atoi(options + 5);
  return 1;
}
