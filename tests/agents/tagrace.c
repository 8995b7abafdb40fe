/*
 * tagrace: tags and object handles while collections run during callbacks
 * (callbacks run in native state, so a collection may happen while one
 * runs). At interval 0 every allocation is sampled; in every callback:
 *
 * - GetTag of the new object is 0: a fresh object never inherits a tag. A
 *   tag lookup or SetTag that used an object address across a collection
 *   leaves a tag on a dead address, which a later object allocated there
 *   inherits (the race that stopped the first native-state attempt, seen as
 *   stale tags in lifecycle_threads);
 * - after SetTag(object, unique), GetTag gives it back;
 * - GetObjectSize and GetObjectClass agree with the event's arguments.
 *
 * An agent-owned pthread forces collections in a loop the whole time (the
 * race's trigger; how many land inside callbacks is up to the scheduler).
 * Independently of scheduling, every 512th callback hands the GC thread a
 * request and waits (on a pthread condition variable, in native state) until
 * one more collection has finished, then checks that its handle still names
 * the same object: same tag, size and class. Before callbacks ran in native
 * state that wait deadlocked; now it is a guaranteed collection inside a
 * callback. The GC thread stops and is joined at VMDeath, which prints
 * `samples N`, `waited W` and `PASS tagrace`, or FAIL lines.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test_agent.h"

static vmtiEnv* g_env;
static pthread_t g_gc_thread;
static int g_started;
static int g_stop;           /* under g_lock */
static long long g_gcs;      /* under g_lock: collections the GC thread finished */
static long long g_samples;  /* atomic */
static long long g_waited;   /* atomic */
static long long g_next_tag; /* atomic */
static int g_failures;       /* atomic */
static char g_fail[256];     /* under g_lock, first failure */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

static void fail(const char* what, long long a, long long b) {
  pthread_mutex_lock(&g_lock);
  if (!g_failures) snprintf(g_fail, sizeof g_fail, "%s (%lld, %lld)", what, a, b);
  __atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&g_lock);
}

static void* gc_loop(void* arg) {
  (void)arg;
  vmtiEnv* env = g_env;
  for (;;) {
    pthread_mutex_lock(&g_lock);
    int stop = g_stop;
    pthread_mutex_unlock(&g_lock);
    if (stop) break;
    vmtiError e = (*env)->ForceGarbageCollection(env);
    if (e == VMTI_ERROR_WRONG_PHASE) break; /* the VM is dying */
    if (e != VMTI_ERROR_NONE) fail("ForceGarbageCollection", e, 0);
    pthread_mutex_lock(&g_lock);
    g_gcs++;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
  }
  /* A callback may still wait for a collection that will not come. */
  pthread_mutex_lock(&g_lock);
  g_stop = 1;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_lock);
  return NULL;
}

static void check_handle(vmtiEnv* env, vmtiObject object, vmtiClass klass, vmtiLong size,
                         vmtiLong tag, const char* when) {
  vmtiLong got = -1, sz = -1;
  vmtiClass k = NULL;
  char what[64];
  if ((*env)->GetTag(env, object, &got) != VMTI_ERROR_NONE || got != tag) {
    snprintf(what, sizeof what, "GetTag %s", when);
    fail(what, got, tag);
  }
  if ((*env)->GetObjectSize(env, object, &sz) != VMTI_ERROR_NONE || sz != size) {
    snprintf(what, sizeof what, "GetObjectSize %s", when);
    fail(what, sz, size);
  }
  if ((*env)->GetObjectClass(env, object, &k) != VMTI_ERROR_NONE || k != klass) {
    snprintf(what, sizeof what, "GetObjectClass %s", when);
    fail(what, 0, 0);
  }
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)thread;
  long long n = __atomic_add_fetch(&g_samples, 1, __ATOMIC_RELAXED);
  vmtiLong before = -1;
  if ((*env)->GetTag(env, object, &before) != VMTI_ERROR_NONE) fail("GetTag", 0, 0);
  if (before != 0) fail("a new object already has a tag", before, n);
  /* Several rounds per callback: each is a chance for a collection to land
   * between resolving the handle and using the address. */
  vmtiLong tag = 0;
  for (int round = 0; round < 8; round++) {
    tag = __atomic_add_fetch(&g_next_tag, 1, __ATOMIC_RELAXED);
    if ((*env)->SetTag(env, object, tag) != VMTI_ERROR_NONE) fail("SetTag", 0, 0);
    check_handle(env, object, klass, size, tag, "after SetTag");
  }
  if (n % 512 != 0) return;
  /* A collection inside this callback, whatever the scheduler does. */
  pthread_mutex_lock(&g_lock);
  const long long want = g_gcs + 1;
  while (g_gcs < want && !g_stop) pthread_cond_wait(&g_cond, &g_lock);
  const int got = g_gcs >= want;
  pthread_mutex_unlock(&g_lock);
  if (!got) return; /* the VM is dying: no more collections */
  __atomic_add_fetch(&g_waited, 1, __ATOMIC_RELAXED);
  check_handle(env, object, klass, size, tag, "after a collection");
}

static void on_vm_init(vmtiEnv* env, vmtiThread thread) {
  (void)env;
  (void)thread;
  if (pthread_create(&g_gc_thread, NULL, gc_loop, NULL) != 0) {
    fail("pthread_create", 0, 0);
    return;
  }
  g_started = 1;
}

static void on_vm_death(vmtiEnv* env) {
  (void)env;
  if (g_started) {
    pthread_mutex_lock(&g_lock);
    g_stop = 1;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
    pthread_join(g_gc_thread, NULL);
  }
  printf("samples %lld\n", __atomic_load_n(&g_samples, __ATOMIC_RELAXED));
  long long waited = __atomic_load_n(&g_waited, __ATOMIC_RELAXED);
  long long expected = __atomic_load_n(&g_samples, __ATOMIC_RELAXED) / 512;
  /* Every 512th callback got its collection (none was cut short by death:
   * the program's threads have all finished before VMDeath). */
  if (waited != expected) fail("collections inside callbacks", waited, expected);
  if (__atomic_load_n(&g_failures, __ATOMIC_SEQ_CST)) {
    printf("FAIL tagrace: %d failures, first: %s\n", g_failures, g_fail);
  } else {
    printf("PASS tagrace\n");
  }
  fflush(stdout);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)options;
  (void)reserved;
  g_env = TestAgentEnv(vm);
  if (!g_env) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_INIT, VMTI_EVENT_VM_DEATH,
                                      VMTI_EVENT_SAMPLED_OBJECT_ALLOC, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS,
                      .callbacks = {.SampledObjectAlloc = &on_sample, .VMInit = &on_vm_init,
                                    .VMDeath = &on_vm_death},
                      .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
  return TestAgentSetUp(g_env, &s) == VMTI_ERROR_NONE ? 0 : 1;
}
