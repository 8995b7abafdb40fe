/*
 * nativelock: a callback that blocks on an agent lock held by a thread that
 * needs a safepoint. This deadlocked while callbacks held up safepoints
 * (docs/agent-api.md warned about it); callbacks now run in native state,
 * so it must complete.
 *
 * Option: op=gc | op=mode | op=interval (ForceGarbageCollection,
 * SetEventNotificationMode, SetHeapSamplingInterval). An agent-owned pthread
 * takes the lock L (the first callback waits until it has), waits until the
 * first SampledObjectAlloc callback has started, calls the operation while still holding L, then
 * releases L. The callback, once started, takes L. So the operation always runs while the callback
 * is in flight and cannot return (it holds L) until the operation is done: the operation's
 * safepoint must not wait for it. No timing is involved; a deadlock shows as the runner's timeout.
 *
 * At VMDeath: `op NAME: VMTI_ERROR_NONE`, `callback got the lock after the
 * operation`, `PASS nativelock`.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test_agent.h"

static vmtiEnv* g_env;
static const char* g_op = "gc";
static pthread_t g_thread;
static int g_started;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;  /* "L": held across the operation */
static pthread_mutex_t g_state = PTHREAD_MUTEX_INITIALIZER; /* guards the fields below */
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_holding; /* the holder has taken L */
static int g_entered; /* the first callback has started */
static int g_op_done; /* the operation returned (written under L too) */
static vmtiError g_op_error = VMTI_ERROR_INTERNAL;
static int g_first_saw_done = -1; /* what the first callback saw once it had L */
static long long g_callbacks;

static void* holder(void* arg) {
  (void)arg;
  vmtiEnv* env = g_env;
  pthread_mutex_lock(&g_lock);
  pthread_mutex_lock(&g_state);
  g_holding = 1;
  pthread_cond_broadcast(&g_cond);
  while (!g_entered) pthread_cond_wait(&g_cond, &g_state);
  pthread_mutex_unlock(&g_state);
  vmtiError e;
  if (strcmp(g_op, "mode") == 0) {
    e = (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
  } else if (strcmp(g_op, "interval") == 0) {
    e = (*env)->SetHeapSamplingInterval(env, 4096);
  } else {
    e = (*env)->ForceGarbageCollection(env);
  }
  pthread_mutex_lock(&g_state);
  g_op_error = e;
  g_op_done = 1;
  pthread_mutex_unlock(&g_state);
  pthread_mutex_unlock(&g_lock);
  return NULL;
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)env;
  (void)thread;
  (void)object;
  (void)klass;
  (void)size;
  pthread_mutex_lock(&g_state);
  const int first = !g_entered;
  /* The holder has L before the first callback goes for it. */
  while (first && g_started && !g_holding) pthread_cond_wait(&g_cond, &g_state);
  g_entered = 1;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_state);
  pthread_mutex_lock(&g_lock); /* held by the holder across its operation */
  pthread_mutex_lock(&g_state);
  if (first) g_first_saw_done = g_op_done;
  g_callbacks++;
  pthread_mutex_unlock(&g_state);
  pthread_mutex_unlock(&g_lock);
}

static void on_vm_init(vmtiEnv* env, vmtiThread thread) {
  (void)env;
  (void)thread;
  pthread_mutex_lock(&g_state);
  g_started = pthread_create(&g_thread, NULL, holder, NULL) == 0;
  pthread_mutex_unlock(&g_state);
}

static void on_vm_death(vmtiEnv* env) {
  char* name = NULL;
  if (g_started) pthread_join(g_thread, NULL);
  if ((*env)->GetErrorName(env, g_op_error, &name) == VMTI_ERROR_NONE) {
    printf("op %s: %s\n", g_op, name);
    (*env)->Deallocate(env, (unsigned char*)name);
  }
  if (g_first_saw_done == 1) printf("callback got the lock after the operation\n");
  if (g_started && g_op_error == VMTI_ERROR_NONE && g_first_saw_done == 1 && g_callbacks > 1) {
    printf("PASS nativelock\n");
  } else {
    printf("FAIL nativelock: started %d, saw %d, callbacks %lld\n", g_started, g_first_saw_done,
           g_callbacks);
  }
  fflush(stdout);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (options != NULL && strncmp(options, "op=", 3) == 0) g_op = options + 3;
  if (strcmp(g_op, "gc") != 0 && strcmp(g_op, "mode") != 0 && strcmp(g_op, "interval") != 0) {
    fprintf(stderr, "nativelock: unknown option '%s'\n", options);
    return 1;
  }
  g_env = TestAgentEnv(vm);
  if (!g_env) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_INIT, VMTI_EVENT_VM_DEATH,
                                      VMTI_EVENT_SAMPLED_OBJECT_ALLOC, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.SampledObjectAlloc = &on_sample, .VMInit = &on_vm_init,
                                    .VMDeath = &on_vm_death},
                      .set_interval = TA_SET_INTERVAL, .interval = 4096, .events = kEvents};
  return TestAgentSetUp(g_env, &s) == VMTI_ERROR_NONE ? 0 : 1;
}
