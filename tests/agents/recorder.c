/*
 * recorder: several environments at once (minivm allows what HotSpot's
 * TwoAgentsTest forbids). Load it twice, e.g.
 *     // agent: recorder=name=A,interval=0
 *     // agent: recorder=name=B,interval=0
 * The same library loaded twice is one copy in memory, so each load keeps
 * its state in its own env's local storage, and both find each other
 * through a registry in the library. Each env holds every capability and
 * enables every event (tagging each sampled object with its own tag), and
 * records the sequence of samples it receives per thread as a hash of
 * (class, size, sample_count, tag read back). At the last VMDeath the
 * recorders compare: every env must have seen exactly the same samples.
 *
 * Each VMDeath prints `NAME events N`; the last one prints
 * `PASS recorder same samples` or FAIL: with equal intervals, nothing is
 * thinned. Options: name=, interval= (this env's; the default is
 * 524288), digest=1 (also print the hash),
 * quiet=1 (no `events` line, for runs whose count is random).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_ENVS 8
#define MAX_THREADS 64

typedef struct {
  char name[32];
  vmtiEnv* env;
  long long events;
  long long tag_next;
  long long bad_tags;
  long long frees, promotes;
  uint64_t hash[MAX_THREADS]; /* per thread id: events on different threads interleave */
  int died;
  int digest;
  int quiet;
} Recorder;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Recorder g_recs[MAX_ENVS];
static int g_nrecs;
static int g_deaths;

static Recorder* self(vmtiEnv* env) {
  void* p = NULL;
  if ((*env)->GetEnvironmentLocalStorage(env, &p) != VMTI_ERROR_NONE) return NULL;
  return (Recorder*)p;
}

static void mix(uint64_t* h, const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; i++) {
    *h ^= b[i];
    *h *= 1099511628211ULL;
  }
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass, vmtiLong size) {
  Recorder* r = self(env);
  if (!r) return;
  vmtiThreadInfo ti;
  memset(&ti, 0, sizeof ti);
  long long tid = 0;
  if ((*env)->GetThreadInfo(env, thread, &ti) == VMTI_ERROR_NONE) {
    tid = ti.id;
    (*env)->Deallocate(env, (unsigned char*)ti.name);
  }
  if (tid < 0 || tid >= MAX_THREADS) tid = MAX_THREADS - 1;
  char* sig = NULL;
  char cls[32] = "?";
  if ((*env)->GetClassSignature(env, klass, &sig, NULL) == VMTI_ERROR_NONE && sig) {
    snprintf(cls, sizeof cls, "%s", sig);
    (*env)->Deallocate(env, (unsigned char*)sig);
  }
  vmtiSampleInfo info;
  memset(&info, 0, sizeof info);
  (*env)->GetSampleInfo(env, &info);
  pthread_mutex_lock(&g_lock);
  long long tag = ++r->tag_next;
  pthread_mutex_unlock(&g_lock);
  /* tags are per env: the other env's tag on this object must not show */
  vmtiLong before = -1, after = -1;
  (*env)->GetTag(env, object, &before);
  (*env)->SetTag(env, object, tag);
  (*env)->GetTag(env, object, &after);
  pthread_mutex_lock(&g_lock);
  if (before != 0 || after != tag) r->bad_tags++;
  r->events++;
  uint64_t* h = &r->hash[tid];
  mix(h, cls, strlen(cls));
  long long s = size, n = info.sample_count;
  mix(h, &s, sizeof s);
  mix(h, &n, sizeof n);
  pthread_mutex_unlock(&g_lock);
}

static void on_free(vmtiEnv* env, vmtiLong tag) {
  (void)tag;
  Recorder* r = self(env);
  if (!r) return;
  pthread_mutex_lock(&g_lock);
  r->frees++;
  pthread_mutex_unlock(&g_lock);
}

static void on_promote(vmtiEnv* env, vmtiLong tag) {
  (void)tag;
  Recorder* r = self(env);
  if (!r) return;
  pthread_mutex_lock(&g_lock);
  r->promotes++;
  pthread_mutex_unlock(&g_lock);
}

static void on_death(vmtiEnv* env) {
  Recorder* r = self(env);
  pthread_mutex_lock(&g_lock);
  if (!r) {
    printf("FAIL recorder: no env local storage\n");
    fflush(stdout);
    pthread_mutex_unlock(&g_lock);
    return;
  }
  r->died = 1;
  g_deaths++;
  if (!r->quiet) printf("%s events %lld\n", r->name, r->events);
  if (r->bad_tags) printf("FAIL recorder %s: %lld tags not private to the env\n", r->name, r->bad_tags);
  if (r->digest) {
    uint64_t all = 1469598103934665603ULL;
    mix(&all, r->hash, sizeof r->hash);
    printf("%s digest %016llx\n", r->name, (unsigned long long)all);
  }
  if (g_deaths == g_nrecs) {
    int same = 1;
    for (int i = 1; i < g_nrecs; i++) {
      if (g_recs[i].events != g_recs[0].events || memcmp(g_recs[i].hash, g_recs[0].hash, sizeof g_recs[0].hash) != 0) {
        printf("FAIL recorder: %s and %s saw different samples (%lld vs %lld events)\n", g_recs[0].name,
               g_recs[i].name, g_recs[0].events, g_recs[i].events);
        same = 0;
      }
      if (g_recs[i].frees != g_recs[0].frees || g_recs[i].promotes != g_recs[0].promotes) {
        printf("FAIL recorder: %s and %s saw different lifecycles (free %lld/%lld, promote %lld/%lld)\n",
               g_recs[0].name, g_recs[i].name, g_recs[0].frees, g_recs[i].frees, g_recs[0].promotes,
               g_recs[i].promotes);
        same = 0;
      }
    }
    if (g_nrecs < 2) printf("FAIL recorder: only %d env(s) registered\n", g_nrecs);
    else if (same) printf("PASS recorder same samples\n");
  }
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  pthread_mutex_lock(&g_lock);
  if (g_nrecs >= MAX_ENVS) {
    pthread_mutex_unlock(&g_lock);
    return 1;
  }
  Recorder* r = &g_recs[g_nrecs++];
  pthread_mutex_unlock(&g_lock);
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "R%d", g_nrecs);
  for (int i = 0; i < MAX_THREADS; i++) r->hash[i] = 1469598103934665603ULL;
  int set_interval = 0;
  vmtiInt interval = 0;
  const TestAgentOption options_table[] = {TA_STRING_OPTION("name", r->name),
                                            {"interval", TA_OPTION_INT, &interval, 0, &set_interval},
                                            TA_OPTION("digest", TA_OPTION_FLAG, &r->digest),
                                            TA_OPTION("quiet", TA_OPTION_FLAG, &r->quiet), TA_OPTIONS_END};
  if (TestAgentParseOptions("recorder", options, options_table)) return 1;
  vmtiEnv* env = TestAgentEnv(vm);
  if (!env || (*env)->SetEnvironmentLocalStorage(env, r) != VMTI_ERROR_NONE) return 1;
  r->env = env;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_DEATH, VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                      VMTI_EVENT_OBJECT_FREE, VMTI_EVENT_OBJECT_PROMOTE,
                                      VMTI_EVENT_GARBAGE_COLLECTION_START,
                                      VMTI_EVENT_GARBAGE_COLLECTION_FINISH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS | TA_OBJECT_FREE | TA_OBJECT_PROMOTE |
                                      TA_GC_EVENTS,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death,
                                    .ObjectFree = on_free, .ObjectPromote = on_promote},
                      .set_interval = set_interval ? TA_SET_INTERVAL : TA_KEEP_INTERVAL,
                      .interval = interval, .events = kEvents};
  return TestAgentSetUp(env, &s) == VMTI_ERROR_NONE ? 0 : 1;
}
