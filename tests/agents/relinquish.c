/*
 * relinquish: an environment that gives up a capability gets none of the
 * events that need it, even while another environment keeps them coming
 * (the sampler stays on for the other one). Two environments from one
 * Agent_OnLoad, at interval 0, with every capability and event:
 *
 *   keeper   keeps everything; counts Item samples, and the collections
 *            and frees after the quitter let go.
 *   quitter  tags its samples; inside its 100th Item sample relinquishes
 *            can_generate_sampled_alloc_events, _object_free_events,
 *            _object_promote_events and _garbage_collection_events (keeping
 *            can_tag_objects, so its tagged objects still die and would be
 *            reported). From then on any of those events is counted as a
 *            failure. Its enable bits stay set: at thread-2's ThreadStart
 *            it adds can_generate_sampled_alloc_events back, and samples
 *            resume at the next allocation.
 *
 * At VMDeath (each env's own): `keeper items K gc-after yes frees-after
 * yes`, `quitter items A B` (before relinquishing, after adding back) and
 * `PASS relinquish`, or FAIL lines.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test_agent.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static vmtiEnv* g_keeper;
static vmtiEnv* g_quitter;

static long long g_keeper_items, g_keeper_gc_after, g_keeper_frees_after;
static int g_relinquished; /* 0 before, 1 without the capabilities, 2 sampling added back */
static int g_thread_starts;
static long long g_quitter_items[3];
static long long g_quitter_late; /* events that must not have arrived */
static char g_late_what[64];
static int g_failures;
static char g_fail[256];
static int g_deaths;

static void fail(const char* what, int e) {
  if (!g_failures) snprintf(g_fail, sizeof g_fail, "%s: error %d", what, e);
  g_failures++;
}

static void late(const char* what) {
  if (!g_quitter_late) snprintf(g_late_what, sizeof g_late_what, "%s", what);
  g_quitter_late++;
}

static vmtiCapabilities relinquished_caps(void) {
  vmtiCapabilities c;
  memset(&c, 0, sizeof c);
  c.can_generate_sampled_alloc_events = 1;
  c.can_generate_object_free_events = 1;
  c.can_generate_object_promote_events = 1;
  c.can_generate_garbage_collection_events = 1;
  return c;
}

/* ---- keeper ---- */

static void keeper_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                          vmtiLong size) {
  (void)thread;
  (void)size;
  if (!TestAgentClassIs(env, klass, "Item")) return;
  vmtiError e = (*env)->SetTag(env, object, 1);
  if (e != VMTI_ERROR_NONE) fail("keeper SetTag", e);
  pthread_mutex_lock(&g_lock);
  g_keeper_items++;
  pthread_mutex_unlock(&g_lock);
}

static void keeper_gc(vmtiEnv* env) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  if (g_relinquished) g_keeper_gc_after++;
  pthread_mutex_unlock(&g_lock);
}

static void keeper_free(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  (void)tag;
  pthread_mutex_lock(&g_lock);
  if (g_relinquished) g_keeper_frees_after++;
  pthread_mutex_unlock(&g_lock);
}

static void keeper_promote(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  (void)tag;
}

/* ---- quitter ---- */

static void quitter_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                           vmtiLong size) {
  (void)thread;
  (void)size;
  if (!TestAgentClassIs(env, klass, "Item")) return;
  pthread_mutex_lock(&g_lock);
  if (g_relinquished == 1) {
    late("SampledObjectAlloc");
    pthread_mutex_unlock(&g_lock);
    return;
  }
  const int phase = g_relinquished;
  long long n = ++g_quitter_items[phase];
  int relinquish_now = phase == 0 && n == 100;
  pthread_mutex_unlock(&g_lock);
  if (phase == 0) {
    vmtiError e = (*env)->SetTag(env, object, 2);
    if (e != VMTI_ERROR_NONE) fail("quitter SetTag", e);
  }
  if (relinquish_now) {
    vmtiCapabilities give_up = relinquished_caps();
    vmtiError e = (*env)->RelinquishCapabilities(env, &give_up);
    if (e != VMTI_ERROR_NONE) fail("RelinquishCapabilities", e);
    vmtiCapabilities have;
    e = (*env)->GetCapabilities(env, &have);
    if (e != VMTI_ERROR_NONE || have.can_generate_sampled_alloc_events ||
        have.can_generate_object_free_events || have.can_generate_garbage_collection_events ||
        !have.can_tag_objects) {
      fail("GetCapabilities after relinquishing", e);
    }
    e = (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    if (e != VMTI_ERROR_MUST_POSSESS_CAPABILITY) fail("enable without the capability", e);
    pthread_mutex_lock(&g_lock);
    g_relinquished = 1;
    pthread_mutex_unlock(&g_lock);
  }
}

static void quitter_gc(vmtiEnv* env) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  if (g_relinquished) late("GarbageCollectionStart/Finish");
  pthread_mutex_unlock(&g_lock);
}

static void quitter_free(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  (void)tag;
  pthread_mutex_lock(&g_lock);
  if (g_relinquished) late("ObjectFree");
  pthread_mutex_unlock(&g_lock);
}

static void quitter_promote(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  (void)tag;
  pthread_mutex_lock(&g_lock);
  if (g_relinquished) late("ObjectPromote");
  pthread_mutex_unlock(&g_lock);
}

static void quitter_thread_start(vmtiEnv* env, vmtiThread thread) {
  (void)thread;
  pthread_mutex_lock(&g_lock);
  int second = ++g_thread_starts == 2;
  pthread_mutex_unlock(&g_lock);
  if (!second) return;
  vmtiCapabilities back;
  memset(&back, 0, sizeof back);
  back.can_generate_sampled_alloc_events = 1;
  vmtiError e = (*env)->AddCapabilities(env, &back);
  if (e != VMTI_ERROR_NONE) fail("AddCapabilities back", e);
  pthread_mutex_lock(&g_lock);
  g_relinquished = 2;
  pthread_mutex_unlock(&g_lock);
}

/* ---- both ---- */

static void on_death(vmtiEnv* env) {
  pthread_mutex_lock(&g_lock);
  if (env == g_keeper) {
    printf("keeper items %lld gc-after %s frees-after %s\n", g_keeper_items,
           g_keeper_gc_after > 0 ? "yes" : "no", g_keeper_frees_after > 0 ? "yes" : "no");
  } else {
    printf("quitter items %lld %lld\n", g_quitter_items[0], g_quitter_items[2]);
  }
  if (++g_deaths == 2) {
    if (g_quitter_late) {
      printf("FAIL relinquish: %lld events after RelinquishCapabilities (first: %s)\n",
             g_quitter_late, g_late_what);
    } else if (g_failures) {
      printf("FAIL relinquish: %s\n", g_fail);
    } else {
      printf("PASS relinquish\n");
    }
  }
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

static int setup(vmtiVM* vm, vmtiEnv** penv, int quitter) {
  vmtiEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, VMTI_VERSION_1) != VMTI_ERROR_NONE) return 1;
  vmtiCapabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.can_generate_sampled_alloc_events = 1;
  caps.can_tag_objects = 1;
  caps.can_generate_object_free_events = 1;
  caps.can_generate_object_promote_events = 1;
  caps.can_generate_garbage_collection_events = 1;
  if ((*env)->AddCapabilities(env, &caps) != VMTI_ERROR_NONE) return 1;
  vmtiEventCallbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.VMDeath = on_death;
  cb.SampledObjectAlloc = quitter ? quitter_sample : keeper_sample;
  cb.GarbageCollectionStart = quitter ? quitter_gc : keeper_gc;
  cb.GarbageCollectionFinish = quitter ? quitter_gc : keeper_gc;
  cb.ObjectFree = quitter ? quitter_free : keeper_free;
  cb.ObjectPromote = quitter ? quitter_promote : keeper_promote;
  if (quitter) cb.ThreadStart = quitter_thread_start;
  if ((*env)->SetEventCallbacks(env, &cb, (vmtiInt)sizeof cb) != VMTI_ERROR_NONE) return 1;
  const vmtiEvent events[] = {VMTI_EVENT_VM_DEATH,
                              VMTI_EVENT_THREAD_START,
                              VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                              VMTI_EVENT_GARBAGE_COLLECTION_START,
                              VMTI_EVENT_GARBAGE_COLLECTION_FINISH,
                              VMTI_EVENT_OBJECT_FREE,
                              VMTI_EVENT_OBJECT_PROMOTE};
  for (size_t i = 0; i < sizeof events / sizeof events[0]; ++i) {
    if ((*env)->SetEventNotificationMode(env, VMTI_ENABLE, events[i], NULL) != VMTI_ERROR_NONE) {
      return 1;
    }
  }
  *penv = env;
  return 0;
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)options;
  (void)reserved;
  /* The keeper first: for each allocation it hears before the quitter. */
  if (setup(vm, &g_keeper, 0) != 0 || setup(vm, &g_quitter, 1) != 0) {
    fprintf(stderr, "relinquish: setup failed\n");
    return 1;
  }
  /* Each environment's own interval (docs/agent-api.md, "An interval per environment"). */
  if ((*g_keeper)->SetHeapSamplingInterval(g_keeper, 0) != VMTI_ERROR_NONE ||
      (*g_quitter)->SetHeapSamplingInterval(g_quitter, 0) != VMTI_ERROR_NONE)
    return 1;
  return 0;
}
