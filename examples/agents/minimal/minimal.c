/*
 * minimal: the smallest useful VMTI agent.
 *
 * Counts sampled allocations per class and prints, at VM death, how many
 * objects and bytes of each class the program allocated, estimated from the
 * samples. Usage:
 *
 *   minivm -agentlib:minimal prog.mv               (512 KiB interval)
 *   minivm -agentlib:minimal=4096 prog.mv          (4 KiB interval)
 *
 * Read it top to bottom: docs/writing-an-agent.md walks through every line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmti/vmti.h" /* the only header an agent needs */

/* One row per class. A VM has few classes, so a small array will do. */
#define MAX_CLASSES 256
struct row {
  vmtiClass klass;
  long long samples;
  double objects; /* estimated: sum of weight / size over samples */
  double bytes;   /* estimated: sum of weight */
};

/* The agent's state, one per environment: the library may be loaded twice
 * (-agentlib:minimal -agentlib:minimal=4096), and both loads share its
 * globals, so the table hangs off the environment instead. */
struct state {
  struct row rows[MAX_CLASSES];
  int row_count;
  /* Callbacks can run on several threads at once: guard the table. A spin
   * lock on a GCC builtin keeps this file free of any threading library. */
  volatile int lock_word;
};

static struct state* state_of(vmtiEnv* env) {
  void* data = NULL;
  (*env)->GetEnvironmentLocalStorage(env, &data);
  return data;
}
static void lock(struct state* s) {
  while (__sync_lock_test_and_set(&s->lock_word, 1)) {
  }
}
static void unlock(struct state* s) { __sync_lock_release(&s->lock_word); }

/* Called on the allocating thread for every sampled object. */
static void OnSampledObjectAlloc(vmtiEnv* env, vmtiThread thread, vmtiObject object,
                                 vmtiClass klass, vmtiLong size) {
  struct state* s = state_of(env);
  vmtiSampleInfo info;
  (void)thread;
  (void)object;
  /* weight: the bytes this sample stands for (unbiased for any size mix). */
  if ((*env)->GetSampleInfo(env, &info) != VMTI_ERROR_NONE) return;
  lock(s);
  int i = 0;
  while (i < s->row_count && s->rows[i].klass != klass) i++;
  if (i == s->row_count && s->row_count < MAX_CLASSES) {
    s->rows[s->row_count].klass = klass;
    s->row_count++;
  }
  if (i < s->row_count) {
    s->rows[i].samples++;
    s->rows[i].bytes += info.weight;
    s->rows[i].objects += info.weight / (double)size;
  }
  unlock(s);
}

/* The last event: print the table, largest first. */
static int by_bytes(const void* a, const void* b) {
  const struct row* x = a;
  const struct row* y = b;
  return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

static void OnVMDeath(vmtiEnv* env) {
  struct state* s = state_of(env);
  qsort(s->rows, (size_t)s->row_count, sizeof s->rows[0], by_bytes);
  printf("%-12s %10s %14s %14s\n", "class", "samples", "est. objects", "est. bytes");
  for (int i = 0; i < s->row_count; i++) {
    char* name = NULL;
    if ((*env)->GetClassSignature(env, s->rows[i].klass, &name, NULL) != VMTI_ERROR_NONE) {
      continue;
    }
    printf("%-12s %10lld %14.0f %14.0f\n", name, s->rows[i].samples, s->rows[i].objects,
           s->rows[i].bytes);
    (*env)->Deallocate(env, (unsigned char*)name);
  }
  fflush(stdout);
}

/* Runs once, before the program starts. Returning non-zero stops the VM. */
VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  vmtiEnv* env = NULL;
  (void)reserved;
  if ((*vm)->GetEnv(vm, (void**)&env, VMTI_VERSION_1) != VMTI_ERROR_NONE) return 1;

  /* Never freed: a callback may run until the process ends. */
  struct state* s = calloc(1, sizeof *s);
  if (s == NULL || (*env)->SetEnvironmentLocalStorage(env, s) != VMTI_ERROR_NONE) return 1;

  vmtiCapabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.can_generate_sampled_alloc_events = 1;
  if ((*env)->AddCapabilities(env, &caps) != VMTI_ERROR_NONE) return 1;

  vmtiEventCallbacks callbacks;
  memset(&callbacks, 0, sizeof callbacks);
  callbacks.SampledObjectAlloc = &OnSampledObjectAlloc;
  callbacks.VMDeath = &OnVMDeath;
  if ((*env)->SetEventCallbacks(env, &callbacks, (vmtiInt)sizeof callbacks) != VMTI_ERROR_NONE) {
    return 1;
  }

  if (options != NULL && *options != '\0') {
    char* end = NULL;
    long interval = strtol(options, &end, 10);
    if (*end != '\0' || interval < 0 || interval > 0x7fffffffL) {
      fprintf(stderr, "minimal: bad interval '%s' (want bytes, e.g. 4096)\n", options);
      return 1;
    }
    if ((*env)->SetHeapSamplingInterval(env, (vmtiInt)interval) != VMTI_ERROR_NONE) return 1;
  }

  (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
  (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_VM_DEATH, NULL);
  return 0;
}
