/*
 * toggler: an agent-owned native thread toggles the event and the interval
 * in a tight loop while the program's threads allocate (HotSpot's
 * HeapMonitorThreadOnOffTest). The check there is only "no crash, no
 * deadlock"; here also: every event carries a sample_count >= 1, an interval
 * the toggler actually set, and a weight consistent with both; the toggler
 * only ever gets NONE back (WRONG_PHASE once the VM is dying). The suite also
 * runs this under TSan, so all shared state is atomic.
 *
 * The native thread starts in VMInit and is stopped and joined in VMDeath.
 * At VMDeath: `PASS toggler`.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "test_agent.h"

static const vmtiInt kIntervals[] = {0, 256, 4096, 65536, 524288};
#define N_INTERVALS ((int)(sizeof kIntervals / sizeof kIntervals[0]))

static vmtiEnv* g_env;
static pthread_t g_thread;
static int g_started;
static int g_stop;          /* atomic */
static long long g_events;  /* atomic */
static long long g_toggles; /* atomic */
static int g_failures;      /* atomic */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_fail[256];

static void fail(const char* what, long long a, long long b) {
  pthread_mutex_lock(&g_lock);
  if (!g_failures) snprintf(g_fail, sizeof g_fail, "%s (%lld, %lld)", what, a, b);
  __atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&g_lock);
}

static int known_interval(vmtiInt i) {
  for (int k = 0; k < N_INTERVALS; k++)
    if (kIntervals[k] == i) return 1;
  return 0;
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)thread;
  (void)object;
  (void)klass;
  __atomic_add_fetch(&g_events, 1, __ATOMIC_RELAXED);
  vmtiSampleInfo info;
  vmtiError e = (*env)->GetSampleInfo(env, &info);
  if (e != VMTI_ERROR_NONE) {
    fail("GetSampleInfo", e, 0);
    return;
  }
  if (info.sample_count < 1) fail("sample_count < 1", info.sample_count, size);
  if (!known_interval(info.interval)) fail("interval never set", info.interval, 0);
  if (info.interval == 0 && (info.sample_count != 1 || info.weight != (double)size))
    fail("interval 0 sample", info.sample_count, size);
  if (info.interval > 0) {
    double want = (double)size / -expm1(-(double)size / info.interval);
    if (!(fabs(info.weight - want) <= 1e-9 * want)) fail("weight", (long long)info.weight, (long long)want);
  }
}

static int ok_or_dying(vmtiError e) { return e == VMTI_ERROR_NONE || e == VMTI_ERROR_WRONG_PHASE; }

static void* toggle_loop(void* arg) {
  (void)arg;
  vmtiEnv* env = g_env;
  unsigned k = 0;
  while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
    vmtiError e = (*env)->SetEventNotificationMode(env, VMTI_DISABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    if (!ok_or_dying(e)) fail("disable from native thread", e, 0);
    e = (*env)->SetHeapSamplingInterval(env, kIntervals[k % N_INTERVALS]);
    if (!ok_or_dying(e)) fail("SetHeapSamplingInterval from native thread", e, 0);
    vmtiInt got = -1;
    e = (*env)->GetHeapSamplingInterval(env, &got);
    if (!ok_or_dying(e) || (e == VMTI_ERROR_NONE && !known_interval(got)))
      fail("GetHeapSamplingInterval from native thread", e, got);
    e = (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    if (!ok_or_dying(e)) fail("enable from native thread", e, 0);
    vmtiLong t;
    e = (*env)->GetTime(env, &t);
    if (!ok_or_dying(e)) fail("GetTime from native thread", e, 0);
    __atomic_add_fetch(&g_toggles, 1, __ATOMIC_RELAXED);
    k++;
    /* let the allocators run a little between toggles */
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void on_init(vmtiEnv* env, vmtiThread thread) {
  (void)env;
  (void)thread;
  if (pthread_create(&g_thread, NULL, toggle_loop, NULL) != 0) fail("pthread_create", 0, 0);
  else g_started = 1;
}

static void on_death(vmtiEnv* env) {
  (void)env;
  __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
  if (g_started) pthread_join(g_thread, NULL);
  fprintf(stderr, "toggler: %lld events, %lld toggles\n", __atomic_load_n(&g_events, __ATOMIC_RELAXED),
          __atomic_load_n(&g_toggles, __ATOMIC_RELAXED));
  pthread_mutex_lock(&g_lock);
  if (__atomic_load_n(&g_toggles, __ATOMIC_RELAXED) == 0) printf("FAIL toggler: the native thread never toggled\n");
  else if (g_failures) printf("FAIL toggler: %s (%d failures)\n", g_fail, g_failures);
  else printf("PASS toggler\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)options;
  (void)reserved;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_VM_INIT,
                                      VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.VMInit = on_init, .SampledObjectAlloc = on_sample,
                                    .VMDeath = on_death},
                      .set_interval = TA_SET_INTERVAL, .interval = 4096, .events = kEvents};
  g_env = TestAgentStart(vm, &s);
  return g_env ? 0 : 1;
}
