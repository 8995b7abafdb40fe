/*
 * lifecycle: exact object lifecycles at interval 0 (statmemprof's alloc /
 * promote / dealloc; samplers.md section 9, test 7).
 *
 * Every sampled object gets a unique tag (1, 2, 3, ...) and a weak
 * reference. ObjectPromote and ObjectFree are checked as they arrive: the
 * tag must be one this env set, in the right order (alloc < promote <
 * free), each at most once, and never a promotion of an object born in the
 * old generation. At VMDeath (the program has dropped what it does not keep
 * and called gc() at least twice, so every live young object has been
 * promoted) the agent checks, for every tag:
 *   - the weak reference is cleared exactly when ObjectFree was delivered;
 *   - an object that is still alive and was born young has been promoted;
 * and prints the exact totals:
 *   `allocs A young Y old O freed F alive L` (A = Y + O = F + L)
 * then `PASS lifecycle`. GetSampleInfo's generation and GetObjectGeneration
 * must agree at allocation.
 *
 * Options: interval=I (default 0; at I > 0 only the per-tag checks are
 * meaningful and the totals line is replaced by `alive L`), max=N (tags).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

enum { S_ALLOC = 1, S_PROMOTED = 2, S_FREED = 4, S_BORN_OLD = 8 };

typedef struct {
  vmtiWeak weak;
  unsigned char state;
} Entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Entry* g_entries;
static long long g_max = 1 << 20;
static long long g_next_tag;
static long long g_promotes, g_frees;
static vmtiInt g_interval;
static int g_failures;
static char g_fail[8][200];

/* with g_lock held */
static void fail_locked(const char* what, long long tag) {
  if (g_failures < 8) snprintf(g_fail[g_failures], sizeof g_fail[0], "%s (tag %lld)", what, tag);
  g_failures++;
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass, vmtiLong size) {
  (void)thread;
  (void)klass;
  (void)size;
  vmtiSampleInfo info;
  memset(&info, 0, sizeof info);
  vmtiError e1 = (*env)->GetSampleInfo(env, &info);
  vmtiGeneration gen = 0;
  vmtiError e2 = (*env)->GetObjectGeneration(env, object, &gen);
  pthread_mutex_lock(&g_lock);
  /* GetSampleInfo gives the generation at allocation; GetObjectGeneration
   * the one now. They differ only if another thread's collection promoted
   * the object (a root while the callback runs native) in between: then it
   * was promoted before its tag was set, and no ObjectPromote will come. */
  const int promoted_meanwhile =
      info.generation == VMTI_GENERATION_YOUNG && gen == VMTI_GENERATION_OLD;
  if (e1 != VMTI_ERROR_NONE || e2 != VMTI_ERROR_NONE || (gen != info.generation && !promoted_meanwhile))
    fail_locked("GetSampleInfo / GetObjectGeneration disagree", g_next_tag + 1);
  if (g_next_tag + 1 >= g_max) {
    fail_locked("too many samples for max=", g_max);
    pthread_mutex_unlock(&g_lock);
    return;
  }
  long long tag = ++g_next_tag;
  /* marked before SetTag: another thread's collection may promote the
   * object (a root while we run) before this callback returns */
  g_entries[tag].state = (unsigned char)(S_ALLOC | (info.generation == VMTI_GENERATION_OLD ? S_BORN_OLD : 0) |
                                         (promoted_meanwhile ? S_PROMOTED : 0));
  pthread_mutex_unlock(&g_lock);

  vmtiLong old_tag = -1;
  vmtiError e = (*env)->GetTag(env, object, &old_tag);
  vmtiWeak w = NULL;
  vmtiError e3 = (*env)->SetTag(env, object, tag);
  vmtiError e4 = (*env)->NewWeakRef(env, object, &w);
  pthread_mutex_lock(&g_lock);
  if (e != VMTI_ERROR_NONE || old_tag != 0) fail_locked("a new object already had a tag", tag);
  if (e3 != VMTI_ERROR_NONE) fail_locked("SetTag", tag);
  if (e4 != VMTI_ERROR_NONE) fail_locked("NewWeakRef", tag);
  g_entries[tag].weak = w;
  pthread_mutex_unlock(&g_lock);
}

static void on_promote(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  g_promotes++;
  if (tag <= 0 || tag > g_next_tag) fail_locked("ObjectPromote with a tag never set", tag);
  else {
    unsigned char s = g_entries[tag].state;
    if (!(s & S_ALLOC)) fail_locked("ObjectPromote before SampledObjectAlloc", tag);
    if (s & S_PROMOTED) fail_locked("ObjectPromote twice", tag);
    if (s & S_FREED) fail_locked("ObjectPromote after ObjectFree", tag);
    if (s & S_BORN_OLD) fail_locked("ObjectPromote of an object allocated in the old generation", tag);
    g_entries[tag].state = (unsigned char)(s | S_PROMOTED);
  }
  pthread_mutex_unlock(&g_lock);
}

static void on_free(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  g_frees++;
  if (tag <= 0 || tag > g_next_tag) fail_locked("ObjectFree with a tag never set", tag);
  else {
    unsigned char s = g_entries[tag].state;
    if (!(s & S_ALLOC)) fail_locked("ObjectFree before SampledObjectAlloc", tag);
    if (s & S_FREED) fail_locked("ObjectFree twice", tag);
    g_entries[tag].state = (unsigned char)(s | S_FREED);
  }
  pthread_mutex_unlock(&g_lock);
}

static void on_death(vmtiEnv* env) {
  pthread_mutex_lock(&g_lock);
  long long young = 0, old = 0, freed = 0, alive = 0;
  for (long long t = 1; t <= g_next_tag; t++) {
    Entry* en = &g_entries[t];
    unsigned char s = en->state;
    if (s & S_BORN_OLD) old++;
    else young++;
    vmtiBool cleared = 0;
    vmtiError e = en->weak ? (*env)->IsWeakRefCleared(env, en->weak, &cleared) : VMTI_ERROR_INVALID_OBJECT;
    if (e != VMTI_ERROR_NONE) {
      fail_locked("IsWeakRefCleared", t);
      continue;
    }
    if (cleared && !(s & S_FREED)) fail_locked("weak reference cleared but no ObjectFree", t);
    if (!cleared && (s & S_FREED)) fail_locked("ObjectFree but the weak reference is not cleared", t);
    if (s & S_FREED) freed++;
    else alive++;
    if (!(s & S_FREED) && !(s & S_BORN_OLD) && !(s & S_PROMOTED))
      fail_locked("alive after full collections but never promoted", t);
    (*env)->DeleteWeakRef(env, en->weak);
  }
  if (g_interval == 0)
    printf("allocs %lld young %lld old %lld freed %lld alive %lld\n", g_next_tag, young, old, freed, alive);
  else
    printf("alive %lld\n", alive);
  fprintf(stderr, "lifecycle: %lld allocs, %lld promotes, %lld frees\n", g_next_tag, g_promotes, g_frees);
  for (int i = 0; i < g_failures && i < 8; i++) printf("FAIL lifecycle: %s\n", g_fail[i]);
  if (g_failures) printf("FAIL lifecycle: %d failures\n", g_failures);
  else printf("PASS lifecycle\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  static const TestAgentOption kOptions[] = {
      TA_OPTION("interval", TA_OPTION_INT, &g_interval), TA_OPTION("max", TA_OPTION_LONG, &g_max), TA_OPTIONS_END};
  if (TestAgentParseOptions("lifecycle", options, kOptions)) return 1;
  g_entries = (Entry*)calloc((size_t)g_max, sizeof(Entry));
  if (!g_entries) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_DEATH, VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                      VMTI_EVENT_OBJECT_FREE, VMTI_EVENT_OBJECT_PROMOTE, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS | TA_OBJECT_FREE | TA_OBJECT_PROMOTE,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death,
                                    .ObjectFree = on_free, .ObjectPromote = on_promote},
                      .set_interval = TA_SET_INTERVAL, .interval = g_interval, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
