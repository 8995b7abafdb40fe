/*
 * gcrecursion: callbacks that collect and allocate (HotSpot's
 * HeapMonitorRecursiveTest and HeapMonitorGCTest, at interval 0).
 *
 * Inside SampledObjectAlloc the agent mallocs and frees, Allocates and
 * Deallocates, and on every `every`-th event calls ForceGarbageCollection
 * (a full collection: it moves and promotes every live young object). It
 * checks:
 *   - no recursion: a per-thread re-entrancy depth never exceeds 1;
 *   - the object handle stays valid across the collection: GetObjectSize
 *     and GetObjectClass give the same answers after it as before, and the
 *     object (a root during the callback) is now in the old generation;
 *   - the number of events is exact: the program allocates `count` objects
 *     of class Cell and nothing else of that class, and the collections the
 *     callback forces (and whatever they allocate) add no event.
 * At VMDeath: `cells N gcs M` and `PASS gcrecursion`.
 *
 * Options: every=K (default 10), count=N (expected Cell events).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

static __thread int t_depth;
static int g_max_depth;
static long long g_events, g_cells, g_gcs;
static long long g_every = 10, g_expect = -1;
static int g_failures;
static char g_fail[256];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char* what, long long a, long long b) {
  pthread_mutex_lock(&g_lock);
  if (!g_failures) snprintf(g_fail, sizeof g_fail, "%s (%lld, %lld)", what, a, b);
  g_failures++;
  pthread_mutex_unlock(&g_lock);
}

static int is_class(vmtiEnv* env, vmtiClass k, const char* want) {
  char* sig = NULL;
  vmtiError e = (*env)->GetClassSignature(env, k, &sig, NULL);
  if (e != VMTI_ERROR_NONE || !sig) {
    fail("GetClassSignature", e, 0);
    return 0;
  }
  int r = strcmp(sig, want) == 0;
  (*env)->Deallocate(env, (unsigned char*)sig);
  return r;
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)thread;
  t_depth++;
  pthread_mutex_lock(&g_lock);
  if (t_depth > g_max_depth) g_max_depth = t_depth;
  long long n = ++g_events;
  pthread_mutex_unlock(&g_lock);

  int cell = is_class(env, klass, "Cell");
  /* native allocation of all sorts inside the callback */
  void* m = malloc(4096);
  if (!m) fail("malloc", 0, 0);
  memset(m, 0x5a, 4096);
  unsigned char* a = NULL;
  vmtiError e = (*env)->Allocate(env, 1000, &a);
  if (e != VMTI_ERROR_NONE || !a) fail("Allocate in callback", e, 0);
  else memset(a, 1, 1000);

  if (n % g_every == 0) {
    e = (*env)->ForceGarbageCollection(env);
    if (e != VMTI_ERROR_NONE) fail("ForceGarbageCollection in SampledObjectAlloc", e, n);
    pthread_mutex_lock(&g_lock);
    g_gcs++;
    pthread_mutex_unlock(&g_lock);
    vmtiLong s2 = -1;
    e = (*env)->GetObjectSize(env, object, &s2);
    if (e != VMTI_ERROR_NONE || s2 != size) fail("GetObjectSize after ForceGarbageCollection", e, s2);
    vmtiClass k2 = NULL;
    e = (*env)->GetObjectClass(env, object, &k2);
    if (e != VMTI_ERROR_NONE) fail("GetObjectClass after ForceGarbageCollection", e, 0);
    else if (is_class(env, k2, "Cell") != cell) fail("class changed across ForceGarbageCollection", n, 0);
    vmtiGeneration g = 0;
    e = (*env)->GetObjectGeneration(env, object, &g);
    if (e != VMTI_ERROR_NONE || g != VMTI_GENERATION_OLD)
      fail("object not in the old generation after a full collection", e, g);
  }
  free(m);
  if (a) (*env)->Deallocate(env, a);
  if (cell) {
    pthread_mutex_lock(&g_lock);
    g_cells++;
    pthread_mutex_unlock(&g_lock);
  }
  t_depth--;
}

static void on_death(vmtiEnv* env) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  printf("cells %lld gcs>0 %d\n", g_cells, g_gcs > 0);
  if (g_max_depth != 1) printf("FAIL gcrecursion: callback nesting depth %d\n", g_max_depth);
  if (g_expect >= 0 && g_cells != g_expect)
    printf("FAIL gcrecursion: %lld Cell events, expected %lld\n", g_cells, g_expect);
  if (g_failures) printf("FAIL gcrecursion: %s (%d failures)\n", g_fail, g_failures);
  if (g_max_depth == 1 && !g_failures && (g_expect < 0 || g_cells == g_expect)) printf("PASS gcrecursion\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  static const TestAgentOption kOptions[] = {
      TA_OPTION("every", TA_OPTION_LONG, &g_every), TA_OPTION("count", TA_OPTION_LONG, &g_expect), TA_OPTIONS_END};
  if (TestAgentParseOptions("gcrecursion", options, kOptions)) return 1;
  if (g_every < 1) g_every = 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death},
                      .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
