/*
 * blocking: a callback that blocks holds up only its own thread
 * (docs/agent-api.md, "Delivery rules"; statmemprof's tests of callbacks
 * that block, and of two threads whose callbacks block alternately).
 *
 * Interval 0: every sample is tagged, ObjectFree and ObjectPromote are on.
 * Two threads of the program allocate garbage and call gc() in rounds.
 *   mode=free (default): the first thread to get an ObjectFree is the
 *     holder, the other the follower. For k = 1..rounds, the holder's k-th
 *     ObjectFree writes a byte to one pipe and blocks reading the other;
 *     the follower's k-th ObjectFree reads the first pipe and writes the
 *     second. Each thread blocks in turn inside its callback until the
 *     other thread's collection delivers its own events.
 *   mode=promote: the holder is the first thread to get an ObjectPromote
 *     (statmemprof's blocking promote callback): it blocks there until the
 *     follower, the other thread, gets an ObjectFree from a collection it
 *     ran meanwhile (one round).
 * If delivery were serialised across threads, or a thread's gc() waited
 * for another thread's callbacks, the follower's events would wait behind
 * the blocked holder forever: the runner's timeout. Nothing here is timed.
 * VMDeath prints `PASS blocking` when every round completed.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_agent.h"

static int g_promote_mode;
static int g_rounds = 3;
static int g_to_follower[2], g_to_holder[2];  /* pipes: [0] read, [1] write */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_have_holder;
static pthread_t g_holder;
static int g_holder_done, g_follower_done;  /* rounds completed */
static long long g_next_tag;
static int g_failures;

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass, vmtiLong size) {
  (void)thread;
  (void)klass;
  (void)size;
  long long tag = __atomic_add_fetch(&g_next_tag, 1, __ATOMIC_SEQ_CST);
  if ((*env)->SetTag(env, object, tag) != VMTI_ERROR_NONE) __atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST);
}

/* Whether the calling thread is the holder (making it one if `claim`). */
static int is_holder(int claim) {
  pthread_mutex_lock(&g_lock);
  if (!g_have_holder && claim) {
    g_have_holder = 1;
    g_holder = pthread_self();
  }
  int holder = g_have_holder && pthread_equal(g_holder, pthread_self());
  int known = g_have_holder;
  pthread_mutex_unlock(&g_lock);
  return known ? holder : -1;
}

static void holder_round(void) {
  if (g_holder_done >= g_rounds) return;
  char c = 'h';
  if (write(g_to_follower[1], &c, 1) != 1 || read(g_to_holder[0], &c, 1) != 1 || c != 'f')
    __atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST);
  g_holder_done++;
}

static void follower_round(void) {
  if (g_follower_done >= g_rounds) return;
  char c = 0;
  if (read(g_to_follower[0], &c, 1) != 1 || c != 'h') __atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST);
  c = 'f';
  if (write(g_to_holder[1], &c, 1) != 1) __atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST);
  g_follower_done++;
}

static void on_free(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  (void)tag;
  int holder = is_holder(!g_promote_mode);
  if (holder == 1 && !g_promote_mode) holder_round();
  else if (holder == 0) follower_round();
}

static void on_promote(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  (void)tag;
  if (!g_promote_mode) return;
  if (is_holder(1) == 1) holder_round();
}

static void on_death(vmtiEnv* env) {
  (void)env;
  fprintf(stderr, "blocking: %s mode, holder %d rounds, follower %d rounds, %lld samples\n",
          g_promote_mode ? "promote" : "free", g_holder_done, g_follower_done, g_next_tag);
  if (g_holder_done != g_rounds || g_follower_done != g_rounds)
    printf("FAIL blocking: rounds %d %d of %d\n", g_holder_done, g_follower_done, g_rounds);
  else if (g_failures)
    printf("FAIL blocking: %d failures\n", g_failures);
  else
    printf("PASS blocking\n");
  fflush(stdout);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (options && strstr(options, "mode=promote")) {
    g_promote_mode = 1;
    g_rounds = 1;
  }
  if (pipe(g_to_follower) != 0 || pipe(g_to_holder) != 0) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_DEATH, VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                      VMTI_EVENT_OBJECT_FREE, VMTI_EVENT_OBJECT_PROMOTE, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS | TA_OBJECT_FREE | TA_OBJECT_PROMOTE,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death,
                                    .ObjectFree = on_free, .ObjectPromote = on_promote},
                      .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
