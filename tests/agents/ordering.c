/*
 * ordering: the order of events over the VM's life.
 *
 * Holds every capability, enables every event (sampling at interval 0
 * unless interval=I) and tags every sampled object. Checks:
 *   - VMInit is the first event (nothing before it), exactly once, in LIVE;
 *   - a spawned thread's ThreadStart comes before any other event on that
 *     thread and its ThreadEnd after all of them; each at most once, and
 *     never for main;
 *   - GarbageCollectionStart / Finish alternate, never nested;
 *   - per tag: SampledObjectAlloc < ObjectPromote < ObjectFree, each once;
 *   - VMDeath exactly once, and no event of any kind after it (also from
 *     threads still running when main returned), also when the program ends
 *     by exit(n) or by a runtime error;
 *   - Agent_OnUnload comes after VMDeath.
 * VMDeath prints `vmdeath`; Agent_OnUnload prints the verdict
 * (`PASS ordering` or FAIL lines), since only then is "nothing after
 * VMDeath" known. GC callbacks only touch atomics.
 *
 * Options: interval=I, daemon=1 (threads may still run, or have died by a
 * runtime error, at VM death: their ThreadEnd is not required).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_THREADS 64
#define MAX_TAGS (1 << 20)

enum { ST_BEFORE = 0, ST_LIVE = 1, ST_DEAD = 2 };

static int g_state;        /* atomic */
static int g_inits;        /* atomic */
static int g_deaths;       /* atomic */
static long long g_late;   /* atomic: events after VMDeath */
static int g_early;        /* atomic: events before VMInit */
static int g_gc_depth;     /* atomic */
static int g_gc_bad;       /* atomic */
static long long g_gcs;    /* atomic */
static int g_daemon;
static vmtiInt g_interval;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_started[MAX_THREADS], g_ended[MAX_THREADS];
static unsigned char* g_tag_state; /* 1 alloc, 2 promoted, 4 freed */
static long long g_next_tag;
static long long g_samples, g_promotes, g_frees;
static int g_failures;
static char g_fail[8][200];

static void fail(const char* what, long long a) {
  pthread_mutex_lock(&g_lock);
  if (g_failures < 8) snprintf(g_fail[g_failures], sizeof g_fail[0], "%s (%lld)", what, a);
  g_failures++;
  pthread_mutex_unlock(&g_lock);
}

/* Every event starts here: returns 0 when the event must be ignored. */
static int arrive(void) {
  int s = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
  if (s == ST_DEAD) {
    __atomic_add_fetch(&g_late, 1, __ATOMIC_RELAXED);
    return 0;
  }
  if (s == ST_BEFORE) {
    __atomic_add_fetch(&g_early, 1, __ATOMIC_RELAXED);
    return 0;
  }
  return 1;
}

static long long thread_id(vmtiEnv* env, vmtiThread t) {
  vmtiThreadInfo ti;
  memset(&ti, 0, sizeof ti);
  if ((*env)->GetThreadInfo(env, t, &ti) != VMTI_ERROR_NONE) return -1;
  if (ti.name) (*env)->Deallocate(env, (unsigned char*)ti.name);
  return ti.id;
}

static void on_init(vmtiEnv* env, vmtiThread thread) {
  (void)thread;
  if (__atomic_add_fetch(&g_inits, 1, __ATOMIC_SEQ_CST) != 1) fail("VMInit twice", 0);
  int expected = ST_BEFORE;
  if (!__atomic_compare_exchange_n(&g_state, &expected, ST_LIVE, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    fail("VMInit after VMDeath", expected);
  vmtiPhase ph = 0;
  if ((*env)->GetPhase(env, &ph) != VMTI_ERROR_NONE || ph != VMTI_PHASE_LIVE) fail("VMInit not in LIVE", ph);
}

static void on_death(vmtiEnv* env) {
  (void)env;
  if (__atomic_add_fetch(&g_deaths, 1, __ATOMIC_SEQ_CST) != 1) fail("VMDeath twice", 0);
  if (__atomic_load_n(&g_inits, __ATOMIC_SEQ_CST) != 1) fail("VMDeath without VMInit", 0);
  pthread_mutex_lock(&g_lock);
  if (!g_daemon)
    for (int i = 0; i < MAX_THREADS; i++)
      if (g_started[i] != g_ended[i]) {
        if (g_failures < 8) snprintf(g_fail[g_failures], sizeof g_fail[0], "thread-%d: ThreadStart without ThreadEnd", i);
        g_failures++;
      }
  pthread_mutex_unlock(&g_lock);
  if (__atomic_load_n(&g_gc_depth, __ATOMIC_SEQ_CST) != 0) fail("VMDeath inside a collection", 0);
  __atomic_store_n(&g_state, ST_DEAD, __ATOMIC_SEQ_CST);
  printf("vmdeath\n");
  fflush(stdout);
}

static void on_thread_start(vmtiEnv* env, vmtiThread thread) {
  if (!arrive()) return;
  long long id = thread_id(env, thread);
  if (id <= 0 || id >= MAX_THREADS) {
    fail("ThreadStart for main or an unknown thread", id);
    return;
  }
  pthread_mutex_lock(&g_lock);
  if (g_started[id]++) {
    if (g_failures < 8) snprintf(g_fail[g_failures], sizeof g_fail[0], "thread-%lld: ThreadStart twice", id);
    g_failures++;
  }
  pthread_mutex_unlock(&g_lock);
}

static void on_thread_end(vmtiEnv* env, vmtiThread thread) {
  if (!arrive()) return;
  long long id = thread_id(env, thread);
  if (id <= 0 || id >= MAX_THREADS) {
    fail("ThreadEnd for main or an unknown thread", id);
    return;
  }
  pthread_mutex_lock(&g_lock);
  if (!g_started[id] || g_ended[id]++) {
    if (g_failures < 8) snprintf(g_fail[g_failures], sizeof g_fail[0], "thread-%lld: ThreadEnd twice or before ThreadStart", id);
    g_failures++;
  }
  pthread_mutex_unlock(&g_lock);
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass, vmtiLong size) {
  (void)klass;
  (void)size;
  if (!arrive()) return;
  long long id = thread_id(env, thread);
  pthread_mutex_lock(&g_lock);
  g_samples++;
  int bad_thread = id > 0 && id < MAX_THREADS && (!g_started[id] || g_ended[id]);
  long long tag = 0;
  if (g_next_tag + 1 < MAX_TAGS) {
    tag = ++g_next_tag;
    g_tag_state[tag] = 1;
  }
  pthread_mutex_unlock(&g_lock);
  if (bad_thread) fail("SampledObjectAlloc on a thread outside ThreadStart..ThreadEnd", id);
  if (tag && (*env)->SetTag(env, object, tag) != VMTI_ERROR_NONE) fail("SetTag", tag);
}

static void on_promote(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  if (!arrive()) return;
  pthread_mutex_lock(&g_lock);
  g_promotes++;
  int bad = tag <= 0 || tag > g_next_tag || g_tag_state[tag] != 1;
  if (!bad) g_tag_state[tag] |= 2;
  pthread_mutex_unlock(&g_lock);
  if (bad) fail("ObjectPromote out of order", tag);
}

static void on_free(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  if (!arrive()) return;
  pthread_mutex_lock(&g_lock);
  g_frees++;
  int bad = tag <= 0 || tag > g_next_tag || !(g_tag_state[tag] & 1) || (g_tag_state[tag] & 4);
  if (!bad) g_tag_state[tag] |= 4;
  pthread_mutex_unlock(&g_lock);
  if (bad) fail("ObjectFree out of order", tag);
}

static void on_gc_start(vmtiEnv* env) {
  (void)env;
  if (!arrive()) return;
  if (__atomic_add_fetch(&g_gc_depth, 1, __ATOMIC_SEQ_CST) != 1) __atomic_store_n(&g_gc_bad, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&g_gcs, 1, __ATOMIC_RELAXED);
}

static void on_gc_finish(vmtiEnv* env) {
  (void)env;
  if (!arrive()) return;
  if (__atomic_sub_fetch(&g_gc_depth, 1, __ATOMIC_SEQ_CST) != 0) __atomic_store_n(&g_gc_bad, 1, __ATOMIC_RELAXED);
}

VMTI_EXPORT void Agent_OnUnload(vmtiVM* vm) {
  (void)vm;
  if (__atomic_load_n(&g_state, __ATOMIC_SEQ_CST) != ST_DEAD) fail("Agent_OnUnload before VMDeath", 0);
  long long late = __atomic_load_n(&g_late, __ATOMIC_SEQ_CST);
  int early = __atomic_load_n(&g_early, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&g_lock);
  int ok = 1;
  if (late) { printf("FAIL ordering: %lld events after VMDeath\n", late); ok = 0; }
  if (early) { printf("FAIL ordering: %d events before VMInit\n", early); ok = 0; }
  if (__atomic_load_n(&g_gc_bad, __ATOMIC_SEQ_CST)) { printf("FAIL ordering: nested or unbalanced collection events\n"); ok = 0; }
  for (int i = 0; i < g_failures && i < 8; i++) printf("FAIL ordering: %s\n", g_fail[i]);
  if (g_failures) ok = 0;
  if (ok) printf("PASS ordering\n");
  else /* stderr stays clean on success: runtime-error tests check it */
    fprintf(stderr, "ordering: %lld samples, %lld promotes, %lld frees, %lld collections\n", g_samples, g_promotes,
            g_frees, (long long)__atomic_load_n(&g_gcs, __ATOMIC_RELAXED));
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  static const TestAgentOption kOptions[] = {
      TA_OPTION("interval", TA_OPTION_INT, &g_interval), TA_OPTION("daemon", TA_OPTION_FLAG, &g_daemon), TA_OPTIONS_END};
  if (TestAgentParseOptions("ordering", options, kOptions)) return 1;
  g_tag_state = (unsigned char*)calloc(MAX_TAGS, 1);
  if (!g_tag_state) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_INIT, VMTI_EVENT_VM_DEATH,
                                      VMTI_EVENT_THREAD_START, VMTI_EVENT_THREAD_END,
                                      VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                      VMTI_EVENT_GARBAGE_COLLECTION_START,
                                      VMTI_EVENT_GARBAGE_COLLECTION_FINISH, VMTI_EVENT_OBJECT_FREE,
                                      VMTI_EVENT_OBJECT_PROMOTE, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS | TA_OBJECT_FREE | TA_OBJECT_PROMOTE | TA_GC_EVENTS,
                      .callbacks = {.VMInit = on_init, .VMDeath = on_death,
                                    .ThreadStart = on_thread_start, .ThreadEnd = on_thread_end,
                                    .SampledObjectAlloc = on_sample,
                                    .GarbageCollectionStart = on_gc_start,
                                    .GarbageCollectionFinish = on_gc_finish, .ObjectFree = on_free,
                                    .ObjectPromote = on_promote},
                      .set_interval = TA_SET_INTERVAL, .interval = g_interval, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
