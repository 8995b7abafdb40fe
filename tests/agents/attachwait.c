/*
 * attachwait: an Agent_OnAttach that does what the attach tests of
 * tests/tools/run_attach_tests.py need a hostile or slow agent to do.
 *
 * Options (comma-separated, in this order of effect):
 *   thread=NAME  start an agent thread of that name (any bytes but a comma)
 *                that sleeps until the VM ends;
 *   noisy=1      write control characters on stderr (an escape sequence, a
 *                carriage return, a bell);
 *   exit=N       call exit(N) (the process ends from Agent_OnAttach);
 *   unload=PATH  Agent_OnUnload appends a line `Agent_OnUnload` to PATH
 *                (a file, not stderr: the test reads it after the VM ended);
 *   wait=PATH    print `attachwait: waiting` on stderr, then wait until the
 *                file PATH exists (polling every 10 ms) before returning 0.
 * The library is one: the last unload= of any attach is the file used.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmti/vmti.h"

static char g_unload[4096];

static void sleeper(vmtiEnv* env, void* arg) {
  (void)env;
  (void)arg;
  const struct timespec tick = {1, 0};
  for (;;) nanosleep(&tick, NULL);
}

VMTI_EXPORT vmtiInt Agent_OnAttach(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  char wait[4096] = "";
  char* save = NULL;
  for (char* t = options ? strtok_r(options, ",", &save) : NULL; t;
       t = strtok_r(NULL, ",", &save)) {
    if (!strncmp(t, "thread=", 7)) {
      vmtiEnv* env = NULL;
      if ((*vm)->GetEnv(vm, (void**)&env, VMTI_VERSION_1) != VMTI_ERROR_NONE) return 1;
      if ((*env)->RunAgentThread(env, t + 7, sleeper, NULL, NULL) != VMTI_ERROR_NONE) return 1;
    } else if (!strcmp(t, "noisy=1")) {
      fprintf(stderr, "attachwait: \x1b[31mred\x1b[0m\rover\a\n");
      fflush(stderr);
    } else if (!strncmp(t, "exit=", 5)) {
      exit(atoi(t + 5));
    } else if (!strncmp(t, "unload=", 7)) {
      snprintf(g_unload, sizeof g_unload, "%s", t + 7);
    } else if (!strncmp(t, "wait=", 5)) {
      snprintf(wait, sizeof wait, "%s", t + 5);
    } else {
      fprintf(stderr, "attachwait: bad option '%s'\n", t);
      return 1;
    }
  }
  if (wait[0]) {
    fprintf(stderr, "attachwait: waiting\n");
    fflush(stderr);
    const struct timespec tick = {0, 10 * 1000 * 1000};
    while (access(wait, F_OK) != 0) nanosleep(&tick, NULL);
  }
  return 0;
}

VMTI_EXPORT void Agent_OnUnload(vmtiVM* vm) {
  (void)vm;
  if (!g_unload[0]) return;
  FILE* f = fopen(g_unload, "a");
  if (f == NULL) return;
  fputs("Agent_OnUnload\n", f);
  fclose(f);
}
