/*
 * threadfilter: which threads samples come from (HotSpot's ThreadTest and
 * ThreadDisabledTest).
 *
 * In every SampledObjectAlloc callback the agent names the thread with
 * GetThreadInfo (on the callback's thread argument and on GetCurrentThread,
 * which must agree, and whose id must match the name: 0 for main, n for
 * thread-n) and counts samples of class Work per thread name.
 *
 * Options:
 *   interval=I
 *   only=NAME   do not enable the event globally; enable it for one thread,
 *               from that thread's ThreadStart callback (matched by name).
 * At VMDeath it prints `seen NAME NAME ...` (the threads with at least one
 * Work sample, sorted) and `PASS threadfilter`.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_THREADS 64

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_names[MAX_THREADS][32];
static long long g_counts[MAX_THREADS];
static int g_n;
static vmtiInt g_interval = 8192;
static char g_only[32];
static int g_enabled_for_only;
static int g_failures;
static char g_fail[256];

static void fail(const char* what, long long a) {
  pthread_mutex_lock(&g_lock);
  if (!g_failures) snprintf(g_fail, sizeof g_fail, "%s (%lld)", what, a);
  g_failures++;
  pthread_mutex_unlock(&g_lock);
}

/* Returns an Allocate'd name or NULL; checks that id matches the name. */
static char* thread_name(vmtiEnv* env, vmtiThread t) {
  vmtiThreadInfo ti;
  memset(&ti, 0, sizeof ti);
  vmtiError e = (*env)->GetThreadInfo(env, t, &ti);
  if (e != VMTI_ERROR_NONE || !ti.name) {
    fail("GetThreadInfo", e);
    return NULL;
  }
  long long want = -1;
  if (!strcmp(ti.name, "main")) want = 0;
  else if (!strncmp(ti.name, "thread-", 7)) want = atoll(ti.name + 7);
  if (want != ti.id) fail("thread id does not match its name", (long long)ti.id);
  return ti.name;
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)object;
  (void)size;
  if (!TestAgentClassIs(env, klass, "Work")) return;
  char* name = thread_name(env, thread);
  if (!name) return;
  vmtiThread cur = NULL;
  vmtiError e = (*env)->GetCurrentThread(env, &cur);
  if (e != VMTI_ERROR_NONE) {
    fail("GetCurrentThread", e);
  } else {
    char* name2 = thread_name(env, cur);
    if (name2 && strcmp(name, name2) != 0) fail("callback thread is not the current thread", 0);
    if (name2) (*env)->Deallocate(env, (unsigned char*)name2);
  }
  pthread_mutex_lock(&g_lock);
  int i;
  for (i = 0; i < g_n; i++)
    if (!strcmp(g_names[i], name)) break;
  if (i == g_n && g_n < MAX_THREADS) snprintf(g_names[g_n++], 32, "%s", name);
  if (i < g_n) g_counts[i]++;
  pthread_mutex_unlock(&g_lock);
  (*env)->Deallocate(env, (unsigned char*)name);
}

static void on_thread_start(vmtiEnv* env, vmtiThread thread) {
  if (!g_only[0]) return;
  char* name = thread_name(env, thread);
  if (!name) return;
  if (!strcmp(name, g_only)) {
    vmtiError e = (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, thread);
    if (e != VMTI_ERROR_NONE) fail("SetEventNotificationMode for one thread", e);
    pthread_mutex_lock(&g_lock);
    g_enabled_for_only++;
    pthread_mutex_unlock(&g_lock);
  }
  (*env)->Deallocate(env, (unsigned char*)name);
}

static int name_cmp(const void* a, const void* b) {
  const char* x = (const char*)a;
  const char* y = (const char*)b;
  /* numeric order for thread-N */
  if (!strncmp(x, "thread-", 7) && !strncmp(y, "thread-", 7)) return atoi(x + 7) - atoi(y + 7);
  return strcmp(x, y);
}

static void on_death(vmtiEnv* env) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  qsort(g_names, (size_t)g_n, sizeof g_names[0], name_cmp);
  printf("seen");
  for (int i = 0; i < g_n; i++) printf(" %s", g_names[i]);
  printf("\n");
  if (g_only[0] && g_enabled_for_only != 1) printf("FAIL threadfilter: enabled for %d threads\n", g_enabled_for_only);
  if (g_failures) printf("FAIL threadfilter: %s\n", g_fail);
  if (!g_failures && (!g_only[0] || g_enabled_for_only == 1)) printf("PASS threadfilter\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  static const TestAgentOption kOptions[] = {
      TA_OPTION("interval", TA_OPTION_INT, &g_interval), TA_STRING_OPTION("only", g_only), TA_OPTIONS_END};
  if (TestAgentParseOptions("threadfilter", options, kOptions)) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_THREAD_START, VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.SampledObjectAlloc = on_sample, .ThreadStart = on_thread_start,
                                    .VMDeath = on_death},
                      .set_interval = TA_SET_INTERVAL, .interval = g_interval, .events = kEvents};
  vmtiEnv* env = TestAgentStart(vm, &s);
  if (!env) return 1;
  if (!g_only[0] &&
      (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL) != VMTI_ERROR_NONE)
    return 1;
  return 0;
}
