/*
 * forcer: collections forced from a thread that does not allocate, while
 * the program samples densely, deliver every event, and VM death loses none
 * (docs/agent-api.md, "Delivery rules": every ObjectFree of a collection
 * that completed before VM death is delivered before VMDeath).
 *
 * Every sample (interval=BYTES, default 4096) is tagged with a fresh tag and
 * weakly referenced. An agent thread (RunAgentThread, at VMInit) forces
 * collections back to back until the VM ends them (WRONG_PHASE), as
 * heapprof's ?gc=1 or `minivm-attach PID gc` would, many times a second. At
 * VMDeath, for every tag: its weak reference is cleared exactly when its
 * ObjectFree came. A collection of the agent thread's that was delivering
 * when the program ended must still have every event delivered first. A
 * starved forced collection (its delivery waiting behind the sampling
 * thread's tag operations) shows as too few forced collections and, on a
 * long enough program, the runner's timeout.
 *
 * Option `block_at_end`: once the program starts a thread (its cue that
 * the end is near), the agent thread's first ObjectFree of its next
 * collection blocks until VMDeath: the rest of that collection's events
 * must still be delivered before VMDeath, by the thread ending the VM. The
 * blocked callback itself is waited for only about a second, then VMDeath
 * is posted and releases it. So that the program cannot end before that
 * collection ran, its 1,000th sample after the cue waits (in the callback)
 * until the agent thread has blocked. Prints `PASS forcer`.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

enum { kMax = 1 << 21, S_FREED = 1 };

typedef struct {
  vmtiWeak weak;
  unsigned char state;
} Entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Entry* g_entries;
static long long g_next_tag, g_frees, g_forced;
static vmtiInt g_interval = 4096;
static int g_block_at_end;
static pthread_mutex_t g_block_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_block_cv = PTHREAD_COND_INITIALIZER;
static int g_ending, g_dead, g_blocked_once;
static long long g_after_cue;  /* program samples since the cue; under g_block_lock */
static __thread int t_is_forcer, t_new_batch;
static int g_failures;
static char g_fail[200];

static void fail_locked(const char* what, long long tag) {
  if (g_failures++ == 0) snprintf(g_fail, sizeof g_fail, "%s (tag %lld)", what, tag);
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass, vmtiLong size) {
  (void)thread;
  (void)klass;
  (void)size;
  if (g_block_at_end) {
    pthread_mutex_lock(&g_block_lock);
    if (g_ending && ++g_after_cue == 1000) {
      /* The garbage made since the cue is what the agent thread's next
       * collection frees: wait until it is blocked in that ObjectFree. */
      while (!g_blocked_once) pthread_cond_wait(&g_block_cv, &g_block_lock);
    }
    pthread_mutex_unlock(&g_block_lock);
  }
  pthread_mutex_lock(&g_lock);
  if (g_next_tag + 1 >= kMax) {
    pthread_mutex_unlock(&g_lock);
    return;
  }
  long long tag = ++g_next_tag;
  pthread_mutex_unlock(&g_lock);
  vmtiWeak w = NULL;
  vmtiError e1 = (*env)->SetTag(env, object, tag);
  vmtiError e2 = (*env)->NewWeakRef(env, object, &w);
  pthread_mutex_lock(&g_lock);
  if (e1 != VMTI_ERROR_NONE) fail_locked("SetTag", tag);
  if (e2 != VMTI_ERROR_NONE) fail_locked("NewWeakRef", tag);
  g_entries[tag].weak = w;
  pthread_mutex_unlock(&g_lock);
}

static void on_free(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  if (tag <= 0 || tag > g_next_tag) fail_locked("ObjectFree with a tag never set", tag);
  else if (g_entries[tag].state & S_FREED) fail_locked("ObjectFree twice", tag);
  else g_entries[tag].state |= S_FREED;
  g_frees++;
  pthread_mutex_unlock(&g_lock);
  if (!g_block_at_end || !t_is_forcer || !t_new_batch) return;
  t_new_batch = 0;
  pthread_mutex_lock(&g_block_lock);
  if (g_ending && !g_blocked_once) {
    g_blocked_once = 1;
    pthread_cond_broadcast(&g_block_cv);
    while (!g_dead) pthread_cond_wait(&g_block_cv, &g_block_lock);
  }
  pthread_mutex_unlock(&g_block_lock);
}

/* Inside the pause, on the collecting thread: its next ObjectFree is the
 * first of this collection's. */
static void on_gc_finish(vmtiEnv* env) {
  (void)env;
  t_new_batch = 1;
}

static void on_thread_start(vmtiEnv* env, vmtiThread thread) {
  vmtiThreadInfo info;
  memset(&info, 0, sizeof info);
  if ((*env)->GetThreadInfo(env, thread, &info) != VMTI_ERROR_NONE) return;
  const int program_thread = info.name != NULL && strcmp(info.name, "forcer") != 0;
  (*env)->Deallocate(env, (unsigned char*)info.name);
  if (!program_thread) return;  /* the agent thread's own start */
  pthread_mutex_lock(&g_block_lock);
  g_ending = 1;
  pthread_mutex_unlock(&g_block_lock);
}

static void forcer(vmtiEnv* env, void* arg) {
  (void)arg;
  t_is_forcer = 1;
  for (;;) {
    vmtiError e = (*env)->ForceGarbageCollection(env);
    if (e == VMTI_ERROR_WRONG_PHASE) return;  /* the VM is ending */
    if (e != VMTI_ERROR_NONE) {
      pthread_mutex_lock(&g_lock);
      fail_locked("ForceGarbageCollection", e);
      pthread_mutex_unlock(&g_lock);
      return;
    }
    __atomic_add_fetch(&g_forced, 1, __ATOMIC_SEQ_CST);
  }
}

static void on_init(vmtiEnv* env, vmtiThread thread) {
  (void)thread;
  if ((*env)->RunAgentThread(env, "forcer", forcer, NULL, NULL) != VMTI_ERROR_NONE) {
    pthread_mutex_lock(&g_lock);
    fail_locked("RunAgentThread", 0);
    pthread_mutex_unlock(&g_lock);
  }
}

static void on_death(vmtiEnv* env) {
  pthread_mutex_lock(&g_block_lock);
  g_dead = 1;
  pthread_cond_broadcast(&g_block_cv);
  pthread_mutex_unlock(&g_block_lock);
  pthread_mutex_lock(&g_lock);
  long long freed = 0;
  for (long long t = 1; t <= g_next_tag; t++) {
    Entry* en = &g_entries[t];
    vmtiBool cleared = 0;
    if (en->weak == NULL || (*env)->IsWeakRefCleared(env, en->weak, &cleared) != VMTI_ERROR_NONE) {
      fail_locked("IsWeakRefCleared", t);
      continue;
    }
    if (cleared && !(en->state & S_FREED)) fail_locked("weak reference cleared but no ObjectFree", t);
    if (!cleared && (en->state & S_FREED)) fail_locked("ObjectFree but the weak reference is not cleared", t);
    if (en->state & S_FREED) freed++;
  }
  fprintf(stderr, "forcer: %lld samples, %lld freed, %lld forced collections\n", g_next_tag, freed,
          __atomic_load_n(&g_forced, __ATOMIC_SEQ_CST));
  if (__atomic_load_n(&g_forced, __ATOMIC_SEQ_CST) == 0) fail_locked("no collection was forced", 0);
  if (g_block_at_end && !g_blocked_once) fail_locked("no callback blocked at the end", 0);
  if (g_failures) printf("FAIL forcer: %s (%d failures)\n", g_fail, g_failures);
  else printf("PASS forcer\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (options && strstr(options, "interval=")) g_interval = (vmtiInt)atol(strstr(options, "interval=") + 9);
  if (options && strstr(options, "block_at_end")) g_block_at_end = 1;
  g_entries = (Entry*)calloc(kMax, sizeof(Entry));
  if (!g_entries) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_INIT, VMTI_EVENT_VM_DEATH,
                                      VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_OBJECT_FREE,
                                      VMTI_EVENT_GARBAGE_COLLECTION_FINISH, VMTI_EVENT_THREAD_START,
                                      0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS | TA_OBJECT_FREE | TA_GC_EVENTS,
                      .callbacks = {.VMInit = on_init, .SampledObjectAlloc = on_sample,
                                    .VMDeath = on_death, .ObjectFree = on_free,
                                    .GarbageCollectionFinish = on_gc_finish,
                                    .ThreadStart = on_thread_start},
                      .set_interval = TA_SET_INTERVAL, .interval = g_interval, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
