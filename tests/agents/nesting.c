/*
 * nesting: no VMTI callback runs inside another on the same thread
 * (docs/agent-api.md, "Delivery rules"; statmemprof runs no callback inside
 * another).
 *
 * Interval 0, every sample tagged; every 50th SampledObjectAlloc forces a collection from inside the callback, which frees
 * the garbage the program made since. Every callback (sample, free,
 * promote, thread start and end) checks a thread-local depth: entering one
 * while another runs on the same thread fails. The forced collection's
 * ObjectFree events must come after the callback returned and before the
 * thread allocates again (before it returns to the program): the next
 * sample on a thread whose forced collection freed nothing yet fails
 * (unless option `threads`: another thread's collection may have freed the
 * garbage first). VMDeath prints `PASS nesting`.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

static long long g_every = 50;
static int g_check_free = 1;  /* off with several threads: another one may free our garbage */
static long long g_samples, g_forced, g_frees, g_next_tag;
static int g_failures;
static char g_fail[200];

static __thread int t_depth;
static __thread int t_awaiting_free;  /* forced a collection; no ObjectFree yet */

static void fail(const char* what) {
  if (__atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST) == 1) snprintf(g_fail, sizeof g_fail, "%s", what);
}

static void enter(void) {
  if (t_depth++ != 0) fail("a callback ran inside another on the same thread");
}
static void leave(void) { t_depth--; }

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass, vmtiLong size) {
  (void)thread;
  (void)klass;
  (void)size;
  enter();
  if (t_awaiting_free && g_check_free)
    fail("a forced collection's ObjectFree came after the thread went on allocating");
  long long n = __atomic_add_fetch(&g_samples, 1, __ATOMIC_SEQ_CST);
  (*env)->SetTag(env, object, __atomic_add_fetch(&g_next_tag, 1, __ATOMIC_SEQ_CST));
  if (n % g_every == 0) {
    if ((*env)->ForceGarbageCollection(env) != VMTI_ERROR_NONE) fail("ForceGarbageCollection");
    __atomic_add_fetch(&g_forced, 1, __ATOMIC_SEQ_CST);
    t_awaiting_free = 1;
    /* The handle survives the collection. */
    vmtiLong size2 = 0;
    if ((*env)->GetObjectSize(env, object, &size2) != VMTI_ERROR_NONE || size2 != size)
      fail("the object handle after ForceGarbageCollection");
  }
  leave();
}

static void on_free(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  (void)tag;
  enter();
  __atomic_add_fetch(&g_frees, 1, __ATOMIC_SEQ_CST);
  t_awaiting_free = 0;
  leave();
}

static void on_promote(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  (void)tag;
  enter();
  leave();
}

static void on_thread(vmtiEnv* env, vmtiThread thread) {
  (void)env;
  (void)thread;
  enter();
  leave();
}

static void on_death(vmtiEnv* env) {
  (void)env;
  fprintf(stderr, "nesting: %lld samples, %lld forced collections, %lld frees\n", g_samples, g_forced,
          g_frees);
  if (g_forced == 0) fail("no collection was forced");
  if (g_failures) printf("FAIL nesting: %s (%d failures)\n", g_fail, g_failures);
  else printf("PASS nesting\n");
  fflush(stdout);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (options && strstr(options, "threads")) g_check_free = 0;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_DEATH, VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                      VMTI_EVENT_OBJECT_FREE, VMTI_EVENT_OBJECT_PROMOTE,
                                      VMTI_EVENT_THREAD_START, VMTI_EVENT_THREAD_END, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS | TA_OBJECT_FREE | TA_OBJECT_PROMOTE,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death,
                                    .ObjectFree = on_free, .ObjectPromote = on_promote,
                                    .ThreadStart = on_thread, .ThreadEnd = on_thread},
                      .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
