/*
 * envcycle: profiles started, stopped and disposed by the thousand from
 * inside callbacks (statmemprof's start/stop/discard of profiles, comballoc;
 * docs/agent-api.md, "Delivery rules" and "Environments").
 *
 * A controller environment samples every allocation (interval 0). Every
 * 10th of its samples it starts a profile: a new environment (GetEnv) with
 * every capability, sampling at interval 0 and ObjectFree/ObjectPromote on,
 * whose callbacks tag what it samples. A profile lives through 30 of the
 * controller's samples, then is stopped (SampledObjectAlloc disabled: it
 * must still get the frees and promotions of what it tagged), and 30 later
 * disposed (DisposeEnvironment: from then on it must get nothing). Up to
 * `cycles` profiles (default 2000) are started; a few live at once.
 *
 * Checks: GetEnv never fails (environments are reclaimed); a profile
 * started inside a SampledObjectAlloc callback does not get that same
 * allocation (the controller tags the object first, and the profile's
 * callback reads the controller's tag); a stopped profile gets no sample;
 * a disposed profile gets no event at all; every profile that tagged
 * objects which died before it was disposed got ObjectFree events (summed
 * over all profiles, frees > 0). VMDeath prints `profiles N` and
 * `PASS envcycle`. An event after DisposeEnvironment fails only on the
 * thread that disposed (elsewhere it may be a callback already under way,
 * which JVMTI lets finish); the sample checks assume one program thread.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

enum { kLive = 30, kStopped = 30, kMaxProfiles = 8 };
enum { P_SAMPLING = 1, P_STOPPED = 2, P_DISPOSING = 3, P_DISPOSED = 4 };

typedef struct {
  vmtiEnv* env;
  int state;
  long long started_at;  /* controller sample count */
  long long samples, frees, promotes;
  pthread_t disposer;  /* P_DISPOSED: the thread whose DisposeEnvironment returned */
} Profile;

static vmtiVM* g_vm;
static vmtiEnv* g_control;
static long long g_cycles = 2000;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Profile g_profiles[kMaxProfiles];
static long long g_started, g_control_samples, g_next_tag = 1000000000LL;
static long long g_total_frees, g_total_promotes, g_total_samples;
static int g_failures;
static char g_fail[200];

static void fail_locked(const char* what, long long n) {
  if (g_failures++ == 0) snprintf(g_fail, sizeof g_fail, "%s (%lld)", what, n);
}

/* An event for a disposed profile: on the thread that disposed of it, it
 * surely came after DisposeEnvironment returned; on another thread it may
 * be a callback that was already under way (JVMTI lets those finish). */
static int after_dispose_locked(const Profile* p) {
  return p != NULL && p->state == P_DISPOSED && pthread_equal(p->disposer, pthread_self());
}

/* The profile whose environment is env, or NULL (with g_lock held). */
static Profile* find_locked(vmtiEnv* env) {
  for (int i = 0; i < kMaxProfiles; i++)
    if (g_profiles[i].state != 0 && g_profiles[i].env == env) return &g_profiles[i];
  return NULL;
}

static void profile_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                           vmtiLong size) {
  (void)thread;
  (void)klass;
  (void)size;
  vmtiLong control_tag = 0;
  (*g_control)->GetTag(g_control, object, &control_tag);
  pthread_mutex_lock(&g_lock);
  Profile* p = find_locked(env);
  if (p == NULL) fail_locked("a sample for a profile that is not live", 0);
  else if (p->state != P_SAMPLING) fail_locked("a sample after the profile stopped", p->state);
  else if (control_tag == -p->started_at) fail_locked("a profile saw the allocation it was started in", p->started_at);
  if (p != NULL) p->samples++;
  g_total_samples++;
  long long tag = ++g_next_tag;
  pthread_mutex_unlock(&g_lock);
  if ((*env)->SetTag(env, object, tag) != VMTI_ERROR_NONE) {
    pthread_mutex_lock(&g_lock);
    fail_locked("SetTag in a profile", tag);
    pthread_mutex_unlock(&g_lock);
  }
}

static void profile_free(vmtiEnv* env, vmtiLong tag) {
  (void)tag;
  pthread_mutex_lock(&g_lock);
  Profile* p = find_locked(env);
  if (p == NULL || after_dispose_locked(p)) fail_locked("ObjectFree for a disposed profile", tag);
  else p->frees++;
  g_total_frees++;
  pthread_mutex_unlock(&g_lock);
}

static void profile_promote(vmtiEnv* env, vmtiLong tag) {
  (void)tag;
  pthread_mutex_lock(&g_lock);
  Profile* p = find_locked(env);
  if (p == NULL || after_dispose_locked(p)) fail_locked("ObjectPromote for a disposed profile", tag);
  else p->promotes++;
  g_total_promotes++;
  pthread_mutex_unlock(&g_lock);
}

static vmtiEnv* start_profile(void) {
  vmtiEnv* env = NULL;
  if ((*g_vm)->GetEnv(g_vm, (void**)&env, VMTI_VERSION_1) != VMTI_ERROR_NONE) return NULL;
  vmtiCapabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.can_generate_sampled_alloc_events = 1;
  caps.can_tag_objects = 1;
  caps.can_generate_object_free_events = 1;
  caps.can_generate_object_promote_events = 1;
  vmtiEventCallbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.SampledObjectAlloc = profile_sample;
  cb.ObjectFree = profile_free;
  cb.ObjectPromote = profile_promote;
  if ((*env)->AddCapabilities(env, &caps) != VMTI_ERROR_NONE ||
      (*env)->SetEventCallbacks(env, &cb, (vmtiInt)sizeof cb) != VMTI_ERROR_NONE ||
      (*env)->SetHeapSamplingInterval(env, 0) != VMTI_ERROR_NONE ||
      (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_OBJECT_FREE, NULL) != VMTI_ERROR_NONE ||
      (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_OBJECT_PROMOTE, NULL) != VMTI_ERROR_NONE)
    return NULL;
  return env;
}

static void control_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                           vmtiLong size) {
  (void)thread;
  (void)klass;
  (void)size;
  pthread_mutex_lock(&g_lock);
  const long long n = ++g_control_samples;
  /* Advance every profile's life; act outside the lock (the calls may
   * collect, and collections deliver events that take it). */
  vmtiEnv* to_stop[kMaxProfiles];
  vmtiEnv* to_dispose[kMaxProfiles];
  int stops = 0, disposes = 0;
  for (int i = 0; i < kMaxProfiles; i++) {
    Profile* p = &g_profiles[i];
    if (p->state == P_SAMPLING && n - p->started_at >= kLive) {
      p->state = P_STOPPED;
      to_stop[stops++] = p->env;
    } else if (p->state == P_STOPPED && n - p->started_at >= kLive + kStopped) {
      p->state = P_DISPOSING;  /* one thread disposes of it */
      to_dispose[disposes++] = p->env;
    }
  }
  const int start = n % 10 == 0 && g_started < g_cycles;
  pthread_mutex_unlock(&g_lock);

  for (int i = 0; i < stops; i++) {
    if ((*to_stop[i])->SetEventNotificationMode(to_stop[i], VMTI_DISABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                                NULL) != VMTI_ERROR_NONE) {
      pthread_mutex_lock(&g_lock);
      fail_locked("stopping a profile", n);
      pthread_mutex_unlock(&g_lock);
    }
  }
  for (int i = 0; i < disposes; i++) {
    const vmtiError e = (*to_dispose[i])->DisposeEnvironment(to_dispose[i]);
    /* Forgotten once disposed: an event after this finds no profile. */
    pthread_mutex_lock(&g_lock);
    if (e != VMTI_ERROR_NONE) fail_locked("DisposeEnvironment", n);
    Profile* p = find_locked(to_dispose[i]);
    if (p) {
      p->state = P_DISPOSED;
      p->disposer = pthread_self();
    }
    pthread_mutex_unlock(&g_lock);
  }
  if (!start) return;
  /* This allocation is marked: the profile started now must not get it. */
  (*env)->SetTag(env, object, -n);
  vmtiEnv* penv = start_profile();
  pthread_mutex_lock(&g_lock);
  if (penv == NULL) {
    fail_locked("GetEnv or the new profile's set-up failed at profile", g_started + 1);
    pthread_mutex_unlock(&g_lock);
    return;
  }
  int slot = -1;
  for (int i = 0; i < kMaxProfiles && slot < 0; i++)
    if (g_profiles[i].state == 0 || g_profiles[i].state == P_DISPOSED) slot = i;
  if (slot < 0) {
    fail_locked("more live profiles than expected", n);
    pthread_mutex_unlock(&g_lock);
    return;
  }
  memset(&g_profiles[slot], 0, sizeof g_profiles[slot]);
  g_profiles[slot].env = penv;
  g_profiles[slot].state = P_SAMPLING;
  g_profiles[slot].started_at = n;
  g_started++;
  pthread_mutex_unlock(&g_lock);
  if ((*penv)->SetEventNotificationMode(penv, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL) !=
      VMTI_ERROR_NONE) {
    pthread_mutex_lock(&g_lock);
    fail_locked("starting a profile", n);
    pthread_mutex_unlock(&g_lock);
  }
}

static void on_death(vmtiEnv* env) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  printf("profiles %lld\n", g_started);
  fprintf(stderr, "envcycle: %lld profiles, %lld samples, %lld frees, %lld promotes\n", g_started,
          g_total_samples, g_total_frees, g_total_promotes);
  if (g_total_frees == 0) fail_locked("no profile got an ObjectFree", 0);
  if (g_failures) printf("FAIL envcycle: %s (%d failures)\n", g_fail, g_failures);
  else printf("PASS envcycle\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (options && !strncmp(options, "cycles=", 7)) g_cycles = atoll(options + 7);
  g_vm = vm;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_DEATH, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_TAG_OBJECTS,
                      .callbacks = {.SampledObjectAlloc = control_sample, .VMDeath = on_death},
                      .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
  g_control = TestAgentStart(vm, &s);
  return g_control ? 0 : 1;
}
