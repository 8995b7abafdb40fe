/*
 * deathwait: a VMDeath that takes as long as the test wants, for the
 * SIGINT/SIGTERM tests of tests/tools/run_tool_tests.py (vm_signal_*).
 *
 * VMDeath prints `deathwait: VMDeath` on stderr, optionally forces a full
 * collection (gc=1: prints `deathwait: ForceGarbageCollection N`, the error
 * code; on the signal path VMDeath runs on a thread that is not a VM
 * thread), then waits until the file named by wait=PATH exists (polling
 * every 10 ms; without wait= it does not wait) and prints `deathwait: done`.
 * A test holds the VM in the middle of VMDeath by not creating the file, so
 * that "a second signal ends the process at once" is decided by an exit
 * code, never by timing.
 *
 * Options: wait=PATH, gc=1 (comma-separated).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_agent.h"

static char g_wait[4096];
static int g_gc;

static void on_death(vmtiEnv* env) {
  fprintf(stderr, "deathwait: VMDeath\n");
  fflush(stderr);
  if (g_gc) {
    fprintf(stderr, "deathwait: ForceGarbageCollection %d\n", (int)(*env)->ForceGarbageCollection(env));
    fflush(stderr);
  }
  if (g_wait[0]) {
    const struct timespec tick = {0, 10 * 1000 * 1000};
    while (access(g_wait, F_OK) != 0) nanosleep(&tick, NULL);
  }
  fprintf(stderr, "deathwait: done\n");
  fflush(stderr);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (options) {
    char* save = NULL;
    for (char* t = strtok_r(options, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      if (!strncmp(t, "wait=", 5)) {
        snprintf(g_wait, sizeof g_wait, "%s", t + 5);
      } else if (!strcmp(t, "gc=1")) {
        g_gc = 1;
      } else {
        fprintf(stderr, "deathwait: bad option '%s'\n", t);
        return 1;
      }
    }
  }
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.callbacks = {.VMDeath = on_death},
                      .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
