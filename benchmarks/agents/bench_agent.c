/*
 * bench_agent: the agent the sampling-overhead benchmarks load.
 *
 * Options: mode=capability|empty|stack|stackweak[,interval=BYTES][,keep=N][,disposed=N]
 *   capability  holds can_generate_sampled_alloc_events, never enables it
 *   empty       enables SampledObjectAlloc with an empty callback
 *   stack       the callback takes a 64-frame stack trace and drops it
 *   stackweak   the callback takes a 64-frame stack trace and a weak
 *               reference and stores both (what a heap profiler does)
 *   keep=N      stackweak keeps only the latest N records, deleting the weak
 *               reference of each one it overwrites (default: all). Runs
 *               that sample every allocation need it: a record is 1 KiB.
 *   disposed=N  first makes N environments that enable the event and
 *               disposes of them (a process that started and stopped N
 *               profiles): a sample's cost must not grow with N.
 * Prints the number of samples to stderr at VM death.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmti/vmti.h"

enum mode { CAPABILITY, EMPTY, STACK, STACKWEAK };
static enum mode mode = EMPTY;
static long long samples;

struct record {
  vmtiWeak weak;
  vmtiInt frame_count;
  vmtiFrameInfo frames[64];
};
static struct record* records;
static size_t record_count, record_capacity;
static size_t keep;      /* 0: keep every record; else a ring of this many */
static size_t ring_next; /* with keep: the slot the next record takes */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void OnEmpty(vmtiEnv* env, vmtiThread t, vmtiObject o, vmtiClass k, vmtiLong s) {
  (void)env; (void)t; (void)o; (void)k; (void)s;
  __atomic_fetch_add(&samples, 1, __ATOMIC_RELAXED);
}

static void OnStack(vmtiEnv* env, vmtiThread t, vmtiObject o, vmtiClass k, vmtiLong s) {
  vmtiFrameInfo frames[64];
  vmtiInt frame_count;
  (void)t; (void)o; (void)k; (void)s;
  __atomic_fetch_add(&samples, 1, __ATOMIC_RELAXED);
  (*env)->GetStackTrace(env, NULL, 0, 64, frames, &frame_count);
}

static void OnStackWeak(vmtiEnv* env, vmtiThread t, vmtiObject o, vmtiClass k, vmtiLong s) {
  struct record r;
  (void)t; (void)k; (void)s;
  __atomic_fetch_add(&samples, 1, __ATOMIC_RELAXED);
  if ((*env)->GetStackTrace(env, NULL, 0, 64, r.frames, &r.frame_count) != VMTI_ERROR_NONE) return;
  if ((*env)->NewWeakRef(env, o, &r.weak) != VMTI_ERROR_NONE) return;
  pthread_mutex_lock(&mu);
  if (keep != 0) {
    vmtiWeak dropped = NULL;
    if (records == NULL) records = calloc(keep, sizeof *records);
    if (records != NULL) {
      if (ring_next < record_count) dropped = records[ring_next].weak;
      records[ring_next] = r;
      ring_next = (ring_next + 1) % keep;
      if (record_count < keep) ++record_count;
    }
    pthread_mutex_unlock(&mu);
    if (dropped != NULL) (*env)->DeleteWeakRef(env, dropped);
    return;
  }
  if (record_count == record_capacity) {
    record_capacity = record_capacity ? 2 * record_capacity : 1024;
    records = realloc(records, record_capacity * sizeof *records);
  }
  if (records != NULL) records[record_count++] = r;
  pthread_mutex_unlock(&mu);
}

static void OnDeath(vmtiEnv* env) {
  (void)env;
  fprintf(stderr, "bench_agent: %lld samples\n", samples);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  vmtiEnv* env;
  long interval = -1;
  long disposed = 0;
  (void)reserved;
  for (char* tok = options ? strtok(options, ",") : NULL; tok; tok = strtok(NULL, ",")) {
    if (strcmp(tok, "mode=capability") == 0) mode = CAPABILITY;
    else if (strcmp(tok, "mode=empty") == 0) mode = EMPTY;
    else if (strcmp(tok, "mode=stack") == 0) mode = STACK;
    else if (strcmp(tok, "mode=stackweak") == 0) mode = STACKWEAK;
    else if (strncmp(tok, "interval=", 9) == 0) interval = strtol(tok + 9, NULL, 10);
    else if (strncmp(tok, "keep=", 5) == 0) keep = (size_t)strtoul(tok + 5, NULL, 10);
    else if (strncmp(tok, "disposed=", 9) == 0) disposed = strtol(tok + 9, NULL, 10);
    else { fprintf(stderr, "bench_agent: unknown option '%s'\n", tok); return 1; }
  }
  vmtiCapabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.can_generate_sampled_alloc_events = 1;
  for (long i = 0; i < disposed; i++) {
    vmtiEnv* gone;
    if ((*vm)->GetEnv(vm, (void**)&gone, VMTI_VERSION_1) != VMTI_ERROR_NONE) {
      fprintf(stderr, "bench_agent: GetEnv failed after %ld environments\n", i);
      return 1;
    }
    (*gone)->AddCapabilities(gone, &caps);
    (*gone)->SetEventNotificationMode(gone, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    (*gone)->DisposeEnvironment(gone);
  }
  if ((*vm)->GetEnv(vm, (void**)&env, VMTI_VERSION_1) != VMTI_ERROR_NONE) return 1;
  if ((*env)->AddCapabilities(env, &caps) != VMTI_ERROR_NONE) return 1;
  vmtiEventCallbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.SampledObjectAlloc = mode == STACKWEAK ? &OnStackWeak : mode == STACK ? &OnStack : &OnEmpty;
  cb.VMDeath = &OnDeath;
  if ((*env)->SetEventCallbacks(env, &cb, (vmtiInt)sizeof cb) != VMTI_ERROR_NONE) return 1;
  if (interval >= 0 && (*env)->SetHeapSamplingInterval(env, (vmtiInt)interval) != VMTI_ERROR_NONE) {
    return 1;
  }
  (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_VM_DEATH, NULL);
  if (mode != CAPABILITY) {
    (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
  }
  return 0;
}
