/*
 * untrack: an ObjectPromote or ObjectFree is only ever about its own object
 * (docs/agent-api.md, "Delivery rules"; statmemprof's tests of a tracker
 * that stops tracking samples, and starts again, after the fact).
 *
 * Interval 0. Every sample gets an id (1, 2, 3, ...), kept as its tag in a
 * shadow environment (which only tags: it finds any live sample again with
 * GetObjectsWithTags), and a weak reference. The tracking environment tags
 * a sample with a tracking tag of its own while it tracks it. In the first
 * sample callback after each collection, which runs after that collection
 * and before its events are delivered (an allocation's own collection
 * delivers them once its object is reported), the tracker
 *  - stops tracking every other live sample it tracks, in id order
 *    (SetTag(obj, 0)): some of them were just promoted, and their
 *    promotions are still queued;
 *  - then tracks again, with fresh tracking tags, every live sample it had
 *    stopped tracking before.
 * If a tag record could be reused while an event was queued for it, a
 * queued promotion would now be delivered under a fresh tag, for another
 * object, and that object's own promotion later dropped.
 *
 * Checks, as events arrive: no event for a tracking tag that was cleared;
 * no ObjectPromote for a tag set after the last collection (counted by
 * GarbageCollectionFinish) or whose object (GetObjectsWithTags) is young;
 * each at most once, promote before free. At VMDeath (the program ends with
 * two full collections): for each sample tracked now, its weak reference is
 * cleared exactly when its tag got ObjectFree, and one alive that was young
 * when tracked got its ObjectPromote. Prints `allocs A` and `PASS untrack`.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

enum { kMax = 1 << 20 };
enum { T_PROMOTED = 1, T_FREED = 2, T_OLD_AT_TAG = 4, T_CLEARED = 8 };

typedef struct {  /* by sample id */
  vmtiWeak weak;
  long long track;  /* its tracking tag now, 0: not tracked */
} Sample;

typedef struct {  /* by tracking tag */
  long long sample;
  long long gc_at_tag;
  unsigned char state;
} Track;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static vmtiEnv* g_shadow;
static Sample* g_samples;
static Track* g_tracks;
static long long g_next_sample, g_next_track;
static long long g_gc_count; /* GarbageCollectionFinish (inside the pause) */
static long long g_gc_seen;  /* g_gc_count at the last reshuffle; allocating thread only */
static long long g_cleared, g_retracked;
static int g_failures;
static char g_fail[8][200];

static void fail_locked(const char* what, long long tag) {
  if (g_failures < 8) snprintf(g_fail[g_failures], sizeof g_fail[0], "%s (tag %lld)", what, tag);
  g_failures++;
}
static void fail(const char* what, long long tag) {
  pthread_mutex_lock(&g_lock);
  fail_locked(what, tag);
  pthread_mutex_unlock(&g_lock);
}

static long long gc_count(void) { return __atomic_load_n(&g_gc_count, __ATOMIC_SEQ_CST); }

static void on_gc_finish(vmtiEnv* env) {
  (void)env;
  __atomic_add_fetch(&g_gc_count, 1, __ATOMIC_SEQ_CST);
}

/* Starts tracking `object` (sample `id`) under a fresh tracking tag. */
static void track(vmtiEnv* env, vmtiObject object, long long id) {
  vmtiGeneration gen = VMTI_GENERATION_YOUNG;
  if ((*env)->GetObjectGeneration(env, object, &gen) != VMTI_ERROR_NONE) fail("GetObjectGeneration", id);
  pthread_mutex_lock(&g_lock);
  long long t = ++g_next_track;
  if (t >= kMax) {
    fail_locked("too many tracking tags", t);
    pthread_mutex_unlock(&g_lock);
    return;
  }
  g_tracks[t].sample = id;
  g_tracks[t].gc_at_tag = gc_count();
  g_tracks[t].state = gen == VMTI_GENERATION_OLD ? T_OLD_AT_TAG : 0;
  g_samples[id].track = t;
  pthread_mutex_unlock(&g_lock);
  if ((*env)->SetTag(env, object, t) != VMTI_ERROR_NONE) fail("SetTag", t);
}

static int by_tag(const void* a, const void* b) {
  vmtiLong x = *(const vmtiLong*)a, y = *(const vmtiLong*)b;
  return x < y ? -1 : x > y;
}

/* Clears every other tracked live sample's tag, then tracks again every
 * live sample not tracked. */
static void reshuffle(vmtiEnv* env) {
  pthread_mutex_lock(&g_lock);
  const long long n = g_next_sample;
  pthread_mutex_unlock(&g_lock);
  vmtiLong* want = (vmtiLong*)malloc(sizeof(vmtiLong) * (size_t)(n + 1));
  if (want == NULL) return;
  for (long long i = 0; i < n; i++) want[i] = i + 1;
  vmtiInt count = 0;
  vmtiObject* objects = NULL;
  vmtiLong* ids = NULL;
  vmtiError e = (*g_shadow)->GetObjectsWithTags(g_shadow, (vmtiInt)n, want, &count, &objects, &ids);
  free(want);
  if (e != VMTI_ERROR_NONE) {
    fail("GetObjectsWithTags", e);
    return;
  }
  /* (id, index) pairs in id order. */
  vmtiLong* order = (vmtiLong*)malloc(sizeof(vmtiLong) * 2 * (size_t)(count + 1));
  for (vmtiInt i = 0; order && i < count; i++) {
    order[2 * i] = ids[i];
    order[2 * i + 1] = i;
  }
  if (order) qsort(order, (size_t)count, 2 * sizeof(vmtiLong), by_tag);
  int flip = 0;
  for (vmtiInt k = 0; order && k < count; k++) {  /* clear first: frees records */
    const long long id = order[2 * k];
    pthread_mutex_lock(&g_lock);
    const long long t = g_samples[id].track;
    const int clear = t != 0 && (flip ^= 1);
    if (clear) {
      g_tracks[t].state |= T_CLEARED;  /* before: its event must not come now */
      g_samples[id].track = -1;         /* cleared in this round: not tracked again yet */
      g_cleared++;
    }
    pthread_mutex_unlock(&g_lock);
    if (clear) {
      if ((*env)->SetTag(env, objects[order[2 * k + 1]], 0) != VMTI_ERROR_NONE) fail("SetTag 0", t);
    }
  }
  for (vmtiInt k = 0; order && k < count; k++) {  /* then tag: reuses them */
    const long long id = order[2 * k];
    pthread_mutex_lock(&g_lock);
    const long long t = g_samples[id].track;
    if (t == -1) g_samples[id].track = 0;
    pthread_mutex_unlock(&g_lock);
    if (t == 0) {
      g_retracked++;
      track(env, objects[order[2 * k + 1]], id);
    }
  }
  free(order);
  (*g_shadow)->Deallocate(g_shadow, (unsigned char*)objects);
  (*g_shadow)->Deallocate(g_shadow, (unsigned char*)ids);
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass, vmtiLong size) {
  (void)thread;
  (void)klass;
  (void)size;
  const long long gc = gc_count();
  if (gc != g_gc_seen) {
    g_gc_seen = gc;
    reshuffle(env);
  }
  pthread_mutex_lock(&g_lock);
  const long long id = ++g_next_sample;
  pthread_mutex_unlock(&g_lock);
  if (id >= kMax) {
    fail("too many samples", id);
    return;
  }
  vmtiWeak w = NULL;
  if ((*g_shadow)->SetTag(g_shadow, object, id) != VMTI_ERROR_NONE) fail("SetTag (shadow)", id);
  if ((*env)->NewWeakRef(env, object, &w) != VMTI_ERROR_NONE) fail("NewWeakRef", id);
  g_samples[id].weak = w;
  track(env, object, id);
}

static void on_promote(vmtiEnv* env, vmtiLong tag) {
  pthread_mutex_lock(&g_lock);
  int look = 0;
  if (tag <= 0 || tag > g_next_track) {
    fail_locked("ObjectPromote with a tag never set", tag);
  } else {
    Track* t = &g_tracks[tag];
    if (t->state & T_CLEARED) fail_locked("ObjectPromote for a cleared tag", tag);
    if (t->state & T_PROMOTED) fail_locked("ObjectPromote twice", tag);
    if (t->state & T_FREED) fail_locked("ObjectPromote after ObjectFree", tag);
    if (t->state & T_OLD_AT_TAG) fail_locked("ObjectPromote of an object old when tagged", tag);
    if (t->gc_at_tag >= gc_count()) fail_locked("ObjectPromote for a tag set after the last collection", tag);
    t->state |= T_PROMOTED;
    look = !(t->state & T_CLEARED);
  }
  pthread_mutex_unlock(&g_lock);
  if (!look) return;
  /* The object the tag names now is the promoted one: old. */
  vmtiInt count = 0;
  vmtiObject* objects = NULL;
  vmtiLong* tags = NULL;
  vmtiLong want = tag;
  if ((*env)->GetObjectsWithTags(env, 1, &want, &count, &objects, &tags) != VMTI_ERROR_NONE) return;
  vmtiGeneration gen = VMTI_GENERATION_OLD;
  if (count == 1 && (*env)->GetObjectGeneration(env, objects[0], &gen) == VMTI_ERROR_NONE &&
      gen != VMTI_GENERATION_OLD)
    fail("ObjectPromote for an object that is young", tag);
  (*env)->Deallocate(env, (unsigned char*)objects);
  (*env)->Deallocate(env, (unsigned char*)tags);
}

static void on_free(vmtiEnv* env, vmtiLong tag) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  if (tag <= 0 || tag > g_next_track) {
    fail_locked("ObjectFree with a tag never set", tag);
  } else {
    Track* t = &g_tracks[tag];
    if (t->state & T_CLEARED) fail_locked("ObjectFree for a cleared tag", tag);
    if (t->state & T_FREED) fail_locked("ObjectFree twice", tag);
    t->state |= T_FREED;
  }
  pthread_mutex_unlock(&g_lock);
}

static void on_death(vmtiEnv* env) {
  pthread_mutex_lock(&g_lock);
  for (long long id = 1; id <= g_next_sample; id++) {
    const long long t = g_samples[id].track;
    if (t <= 0) continue;
    const unsigned char s = g_tracks[t].state;
    vmtiBool cleared = 0;
    if ((*env)->IsWeakRefCleared(env, g_samples[id].weak, &cleared) != VMTI_ERROR_NONE) {
      fail_locked("IsWeakRefCleared", t);
      continue;
    }
    if (cleared && !(s & T_FREED)) fail_locked("weak reference cleared but no ObjectFree", t);
    if (!cleared && (s & T_FREED)) fail_locked("ObjectFree but the weak reference is not cleared", t);
    if (!(s & T_FREED) && !(s & T_OLD_AT_TAG) && !(s & T_PROMOTED))
      fail_locked("alive after full collections but never promoted", t);
  }
  printf("allocs %lld\n", g_next_sample);
  fprintf(stderr, "untrack: %lld allocs, %lld cleared, %lld tracked again, %lld collections\n",
          g_next_sample, g_cleared, g_retracked, g_gc_count);
  if (g_cleared == 0 || g_retracked == 0) fail_locked("nothing was cleared and tracked again", 0);
  for (int i = 0; i < g_failures && i < 8; i++) printf("FAIL untrack: %s\n", g_fail[i]);
  if (g_failures) printf("FAIL untrack: %d failures\n", g_failures);
  else printf("PASS untrack\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)options;
  (void)reserved;
  g_samples = (Sample*)calloc(kMax, sizeof(Sample));
  g_tracks = (Track*)calloc(kMax, sizeof(Track));
  if (!g_samples || !g_tracks) return 1;
  vmtiEnv* env = TestAgentEnv(vm);
  g_shadow = env ? TestAgentEnv(vm) : NULL;
  if (!g_shadow) return 1;
  vmtiCapabilities caps;
  TestAgentCapabilities(TA_TAG_OBJECTS, &caps);
  if ((*g_shadow)->AddCapabilities(g_shadow, &caps) != VMTI_ERROR_NONE) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_DEATH, VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                      VMTI_EVENT_OBJECT_FREE, VMTI_EVENT_OBJECT_PROMOTE,
                                      VMTI_EVENT_GARBAGE_COLLECTION_FINISH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS | TA_OBJECT_FREE | TA_OBJECT_PROMOTE |
                                      TA_GC_EVENTS,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death,
                                    .ObjectFree = on_free, .ObjectPromote = on_promote,
                                    .GarbageCollectionFinish = on_gc_finish},
                      .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
  return TestAgentSetUp(env, &s) == VMTI_ERROR_NONE ? 0 : 1;
}
