/*
 * onoff: events only while enabled (HotSpot's EventOnOff, StatSimple and
 * the disable half of HeapMonitorTest), exactly, at interval 0.
 *
 * Phases, switched by the agent itself (counts are of class Item only):
 *   0  enabled from Agent_OnLoad; main allocates; the agent disables the
 *      event inside the 100th Item callback, so the phase has exactly 100
 *   1  disabled; main allocates more Items: 0 events
 *   2  ThreadStart of thread-1 re-enables (globally); thread-1 allocates
 *      50 Items; the agent disables in the 50th callback
 *   3  disabled; main allocates after join: 0 events
 *   4  ThreadStart of thread-2 re-enables; thread-2 allocates 30 Items and
 *      main 200 more after joining it: 230
 * Enabling and disabling take effect at the very next allocation of every
 * thread (JDK-8264411), so the counts are exact.
 * At VMDeath: `counts a b c d e` and `PASS onoff`.
 * Option interval=I (default 0): at I > 0 the phases still end after exactly
 * 100 and 50 samples and the off phases still have none; the last count is
 * then random and printed as `>0` when positive.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_phase;
static long long g_counts[5];
static int g_failures;
static vmtiInt g_interval;
static char g_fail[256];

static void fail(const char* what, int e) {
  if (!g_failures) snprintf(g_fail, sizeof g_fail, "%s: error %d", what, e);
  g_failures++;
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)thread;
  (void)object;
  (void)size;
  if (!TestAgentClassIs(env, klass, "Item")) return;
  pthread_mutex_lock(&g_lock);
  long long c = ++g_counts[g_phase];
  if ((g_phase == 0 && c == 100) || (g_phase == 2 && c == 50)) {
    vmtiError e = (*env)->SetEventNotificationMode(env, VMTI_DISABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    if (e != VMTI_ERROR_NONE) fail("disable in callback", e);
    g_phase++;
  }
  pthread_mutex_unlock(&g_lock);
}

static void on_thread_start(vmtiEnv* env, vmtiThread thread) {
  (void)thread;
  pthread_mutex_lock(&g_lock);
  if (g_phase == 1 || g_phase == 3) {
    vmtiError e = (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    if (e != VMTI_ERROR_NONE) fail("enable at ThreadStart", e);
    g_phase++;
  } else {
    fail("ThreadStart in an unexpected phase", g_phase);
  }
  pthread_mutex_unlock(&g_lock);
}

static void on_death(vmtiEnv* env) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  if (g_interval == 0)
    printf("counts %lld %lld %lld %lld %lld\n", g_counts[0], g_counts[1], g_counts[2], g_counts[3], g_counts[4]);
  else
    printf("counts %lld %lld %lld %lld %s\n", g_counts[0], g_counts[1], g_counts[2], g_counts[3],
           g_counts[4] > 0 ? ">0" : "0");
  if (g_failures) printf("FAIL onoff: %s\n", g_fail);
  else printf("PASS onoff\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (options && !strncmp(options, "interval=", 9)) g_interval = (vmtiInt)atol(options + 9);
  static const vmtiEvent kEvents[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_THREAD_START,
                                      VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.SampledObjectAlloc = on_sample, .ThreadStart = on_thread_start,
                                    .VMDeath = on_death},
                      .set_interval = TA_SET_INTERVAL, .interval = g_interval, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
