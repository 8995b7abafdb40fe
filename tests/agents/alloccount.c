/*
 * alloccount: exact counts at interval 0 (HotSpot's ArrayAllSampled,
 * MultiArray and the interval-0 half of StatObjectCorrectness).
 *
 * Sets the interval (default 0) and enables SampledObjectAlloc from
 * Agent_OnLoad. Every event is checked against every other view of the same
 * object: GetObjectSize == size, GetObjectClass names the same class as
 * klass, GetObjectGeneration == GetSampleInfo's generation, and at interval 0
 * sample_count == 1, interval == 0, weight == size. At VMDeath it prints a
 * histogram, one line per (class, size), sorted:
 *     Array 64 6000
 * then `PASS alloccount` (or FAIL lines). At interval 0 the histogram is the
 * exact list of what the program allocated, so the .mv file states it.
 *
 * Options: interval=I, only=CLASS (count only that class; repeatable),
 *          gen=1 (rows also split by generation: `Bytes 1000024 old 5`).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_ROWS 256

typedef struct {
  char cls[32];
  vmtiLong size;
  int old;
  long long count;
} Row;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Row g_rows[MAX_ROWS];
static int g_nrows;
static int g_failures;
static char g_fail[8][256];
static vmtiInt g_interval;
static char g_only[8][32];
static int g_nonly;
static int g_gen;

static void fail(const char* msg, long long a, long long b) {
  pthread_mutex_lock(&g_lock);
  if (g_failures < 8) snprintf(g_fail[g_failures], sizeof g_fail[0], "%s (%lld, %lld)", msg, a, b);
  g_failures++;
  pthread_mutex_unlock(&g_lock);
}

static void name_of(vmtiEnv* env, vmtiClass k, char* out, size_t n) {
  char* sig = NULL;
  vmtiError e = (*env)->GetClassSignature(env, k, &sig, NULL);
  if (e != VMTI_ERROR_NONE || !sig) {
    snprintf(out, n, "?err%d", (int)e);
    return;
  }
  snprintf(out, n, "%s", sig);
  (*env)->Deallocate(env, (unsigned char*)sig);
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)thread;
  char cls[32], cls2[32];
  name_of(env, klass, cls, sizeof cls);
  if (g_nonly) {
    int keep = 0;
    for (int i = 0; i < g_nonly; i++) keep |= !strcmp(g_only[i], cls);
    if (!keep) return;
  }
  vmtiLong osize = -1;
  vmtiError e = (*env)->GetObjectSize(env, object, &osize);
  if (e != VMTI_ERROR_NONE || osize != size) fail("GetObjectSize != size", (long long)e, (long long)osize);
  vmtiClass k2 = NULL;
  e = (*env)->GetObjectClass(env, object, &k2);
  if (e != VMTI_ERROR_NONE) {
    fail("GetObjectClass", (long long)e, 0);
  } else {
    name_of(env, k2, cls2, sizeof cls2);
    if (strcmp(cls, cls2) != 0) fail("GetObjectClass names another class", 0, 0);
  }
  vmtiSampleInfo info;
  memset(&info, 0, sizeof info);
  e = (*env)->GetSampleInfo(env, &info);
  if (e != VMTI_ERROR_NONE) fail("GetSampleInfo", (long long)e, 0);
  if (g_interval == 0 && (info.sample_count != 1 || info.interval != 0 || info.weight != (double)size))
    fail("interval 0 sample info (count, interval)", (long long)info.sample_count, (long long)info.interval);
  vmtiGeneration gen = 0;
  e = (*env)->GetObjectGeneration(env, object, &gen);
  if (e != VMTI_ERROR_NONE || gen != info.generation)
    fail("GetObjectGeneration != sample generation", (long long)gen, (long long)info.generation);
  if (gen != VMTI_GENERATION_YOUNG && gen != VMTI_GENERATION_OLD) fail("bad generation", (long long)gen, 0);
  int old = g_gen ? gen == VMTI_GENERATION_OLD : 0;

  pthread_mutex_lock(&g_lock);
  int i;
  for (i = 0; i < g_nrows; i++)
    if (g_rows[i].size == size && g_rows[i].old == old && !strcmp(g_rows[i].cls, cls)) break;
  if (i == g_nrows && g_nrows < MAX_ROWS) {
    snprintf(g_rows[i].cls, sizeof g_rows[i].cls, "%s", cls);
    g_rows[i].size = size;
    g_rows[i].old = old;
    g_rows[i].count = 0;
    g_nrows++;
  }
  if (i < g_nrows) g_rows[i].count++;
  pthread_mutex_unlock(&g_lock);
}

static int row_cmp(const void* a, const void* b) {
  const Row* x = (const Row*)a;
  const Row* y = (const Row*)b;
  int c = strcmp(x->cls, y->cls);
  if (c) return c;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return x->old - y->old;
}

static void on_death(vmtiEnv* env) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  qsort(g_rows, (size_t)g_nrows, sizeof g_rows[0], row_cmp);
  for (int i = 0; i < g_nrows; i++)
    if (g_gen)
      printf("%s %lld %s %lld\n", g_rows[i].cls, (long long)g_rows[i].size, g_rows[i].old ? "old" : "young",
             g_rows[i].count);
    else
      printf("%s %lld %lld\n", g_rows[i].cls, (long long)g_rows[i].size, g_rows[i].count);
  for (int i = 0; i < g_failures && i < 8; i++) printf("FAIL alloccount: %s\n", g_fail[i]);
  if (!g_failures) printf("PASS alloccount\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  TestAgentOptions o = {.rest = options};
  for (char* t; (t = TestAgentNextOption(&o)) != NULL;) {
    if (!strncmp(t, "interval=", 9)) g_interval = (vmtiInt)atol(t + 9);
    else if (!strcmp(t, "gen=1")) g_gen = 1;
    else if (!strncmp(t, "only=", 5) && g_nonly < 8) snprintf(g_only[g_nonly++], 32, "%.31s", t + 5);
    else {
      fprintf(stderr, "alloccount: bad option %s\n", t);
      return 1;
    }
  }
  static const vmtiEvent kEvents[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death},
                      .set_interval = TA_SET_INTERVAL, .interval = g_interval, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
