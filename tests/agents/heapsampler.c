/*
 * heapsampler: a classic JVMTI heap-sampling agent, ported to VMTI. It is
 * the worked example of docs/writing-an-agent.md ("Porting a JVMTI agent"):
 * every VMTI call below is the JVMTI call of the original with the `vmti`
 * prefix, except where a comment says "JVMTI:".
 *
 * The shape is the usual one:
 *  - can_generate_sampled_alloc_events and GC events; SampledObjectAlloc
 *    takes the allocation site from GetStackTrace (frame 0), the class
 *    from GetClassSignature, and keeps a weak reference to the object
 *    (JVMTI: JNI NewWeakGlobalRef) in a table guarded by a raw monitor,
 *    with per-site tallies (samples, bytes, live);
 *  - a sweeper agent thread (RunAgentThread; JVMTI: a jthread made with JNI
 *    first) sleeps on a raw monitor, is woken by GarbageCollectionFinish,
 *    and drops the samples whose weak reference was cleared (JVMTI:
 *    IsSameObject(ref, NULL)), deleting the reference;
 *  - the sweeper also forces collections (ForceGarbageCollection) when the
 *    callbacks ask it to, every `gc_every` samples;
 *  - every `wait_every`-th sample, the callback itself waits on the raw
 *    monitor until the sweeper's collection has finished, then checks that
 *    its object handle still names the same object (a callback waiting on a
 *    raw monitor does not hold up the collection another thread forces);
 *  - VMDeath stops the sweeper through the monitor and waits until it has
 *    left (the sweeper also leaves on VMTI_ERROR_INTERRUPT, which its wait
 *    returns once the VM is ending), forces a last collection, sweeps, and
 *    prints the per-site tallies.
 *
 * Output (stdout, at VMDeath): `site LINE CLASS samples N bytes B live L`
 * lines sorted by line and class, then `sweeper: ...` and `callbacks: ...`
 * summaries and `PASS heapsampler` or `FAIL heapsampler: ...` lines.
 * Options: interval=N (default 0: every allocation), gc_every=N (default
 * 1000), wait_every=N (default 2000), comma-separated.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_SITES 256
#define MAX_FAILURES 8

typedef struct {
  vmtiMethodID method; /* frame 0 of the sample's stack */
  vmtiLocation location;
  vmtiClass klass;
  vmtiInt line;
  char class_name[64];
  long long samples, bytes, live, dropped;
} Site;

typedef struct {
  vmtiWeak ref; /* JVMTI: a JNI weak global reference */
  int site;
} Sample;

static vmtiEnv* g_env;
static vmtiInt g_interval = 0;
static long long g_gc_every = 1000, g_wait_every = 2000;

/* The sample table and the sites: guarded by g_table. */
static vmtiRawMonitorID g_table;
static Sample* g_samples;
static size_t g_sample_count, g_sample_capacity;
static Site g_sites[MAX_SITES];
static int g_site_count;
static long long g_total_samples;
static int g_failures;
static char g_failure[MAX_FAILURES][160];

/* The sweeper's mailbox: guarded by g_sweeper. */
static vmtiRawMonitorID g_sweeper;
static long long g_gcs_finished;   /* GarbageCollectionFinish events */
static int g_sweep_pending;        /* a collection finished since the last sweep */
static int g_gc_requests;          /* collections the callbacks asked for */
static int g_stop, g_sweeper_done;
static long long g_forced, g_sweeps, g_waits, g_handles_ok;

/* Call with g_table held. */
static void fail_locked(const char* what, long long value) {
  if (g_failures < MAX_FAILURES) {
    snprintf(g_failure[g_failures], sizeof g_failure[0], "%s (%lld)", what, value);
  }
  g_failures++;
}

static void fail(const char* what, long long value) {
  (*g_env)->RawMonitorEnter(g_env, g_table);
  fail_locked(what, value);
  (*g_env)->RawMonitorExit(g_env, g_table);
}

#define CHECK_OK(call)                                  \
  do {                                                  \
    vmtiError err_ = (call);                            \
    if (err_ != VMTI_ERROR_NONE) fail(#call, err_);     \
  } while (0)

/* Call with g_table held. The site of (method, location, klass), made on
 * first use. */
static int site_locked(vmtiEnv* env, vmtiMethodID method, vmtiLocation location,
                       vmtiClass klass) {
  for (int i = 0; i < g_site_count; ++i) {
    Site* s = &g_sites[i];
    if (s->method == method && s->location == location && s->klass == klass) return i;
  }
  if (g_site_count == MAX_SITES) return -1;
  Site* s = &g_sites[g_site_count];
  memset(s, 0, sizeof *s);
  s->method = method;
  s->location = location;
  s->klass = klass;
  s->line = -1;
  if (method != NULL) (*env)->GetLineNumber(env, method, location, &s->line);
  char* name = NULL;
  if ((*env)->GetClassSignature(env, klass, &name, NULL) == VMTI_ERROR_NONE) {
    snprintf(s->class_name, sizeof s->class_name, "%s", name);
    (*env)->Deallocate(env, (unsigned char*)name);
  }
  return g_site_count++;
}

static void sampled_object_alloc(vmtiEnv* env, vmtiThread thread, vmtiObject object,
                                 vmtiClass klass, vmtiLong size) {
  /* JVMTI: (jvmtiEnv*, JNIEnv*, jthread, jobject, jclass, jlong). */
  vmtiFrameInfo frames[1];
  vmtiInt depth = 0;
  vmtiMethodID method = NULL;
  vmtiLocation location = 0;
  if ((*env)->GetStackTrace(env, thread, 0, 1, frames, &depth) == VMTI_ERROR_NONE && depth > 0) {
    method = frames[0].method;
    location = frames[0].location;
  }
  vmtiWeak ref = NULL;
  CHECK_OK((*env)->NewWeakRef(env, object, &ref));

  long long n;
  (*env)->RawMonitorEnter(env, g_table);
  const int site = site_locked(env, method, location, klass);
  if (site >= 0 && ref != NULL) {
    if (g_sample_count == g_sample_capacity) {
      const size_t capacity = g_sample_capacity ? 2 * g_sample_capacity : 1024;
      Sample* grown = (Sample*)realloc(g_samples, capacity * sizeof *grown);
      if (grown == NULL) abort();
      g_samples = grown;
      g_sample_capacity = capacity;
    }
    g_samples[g_sample_count].ref = ref;
    g_samples[g_sample_count].site = site;
    g_sample_count++;
    g_sites[site].samples++;
    g_sites[site].bytes += size;
    g_sites[site].live++;
  } else if (site < 0) {
    fail_locked("too many sites", g_site_count);
  }
  n = ++g_total_samples;
  (*env)->RawMonitorExit(env, g_table);

  if (g_gc_every > 0 && n % g_gc_every == 0) {
    /* Ask the sweeper for a collection; it forces it on its own thread. */
    (*env)->RawMonitorEnter(env, g_sweeper);
    g_gc_requests++;
    (*env)->RawMonitorNotifyAll(env, g_sweeper);
    (*env)->RawMonitorExit(env, g_sweeper);
  }
  if (g_wait_every > 0 && n % g_wait_every == 0) {
    /* Wait, inside the callback, until another thread's collection ends. */
    (*env)->RawMonitorEnter(env, g_sweeper);
    const long long target = g_gcs_finished + 1;
    g_gc_requests++;
    (*env)->RawMonitorNotifyAll(env, g_sweeper);
    while (g_gcs_finished < target) CHECK_OK((*env)->RawMonitorWait(env, g_sweeper, 0));
    g_waits++;
    (*env)->RawMonitorExit(env, g_sweeper);
    /* The handle survived the collection, and names the same object. */
    vmtiLong size_after = -1;
    vmtiClass klass_after = NULL;
    CHECK_OK((*env)->GetObjectSize(env, object, &size_after));
    CHECK_OK((*env)->GetObjectClass(env, object, &klass_after));
    if (size_after == size && klass_after == klass) {
      (*env)->RawMonitorEnter(env, g_sweeper);
      g_handles_ok++;
      (*env)->RawMonitorExit(env, g_sweeper);
    }
  }
}

static void gc_finish(vmtiEnv* env) {
  /* Inside the pause: raw monitors are allowed (and nothing else that
   * touches the heap). Wake the sweeper. */
  (*env)->RawMonitorEnter(env, g_sweeper);
  g_gcs_finished++;
  g_sweep_pending = 1;
  (*env)->RawMonitorNotifyAll(env, g_sweeper);
  (*env)->RawMonitorExit(env, g_sweeper);
}

/* Drops the samples whose object died. */
static void sweep(vmtiEnv* env) {
  (*env)->RawMonitorEnter(env, g_table);
  size_t kept = 0;
  for (size_t i = 0; i < g_sample_count; ++i) {
    vmtiBool cleared = 0;
    vmtiError err = (*env)->IsWeakRefCleared(env, g_samples[i].ref, &cleared);
    if (err != VMTI_ERROR_NONE) fail_locked("IsWeakRefCleared", err);
    if (err == VMTI_ERROR_NONE && cleared) {
      (*env)->DeleteWeakRef(env, g_samples[i].ref); /* JVMTI: DeleteWeakGlobalRef */
      g_sites[g_samples[i].site].live--;
      g_sites[g_samples[i].site].dropped++;
    } else {
      g_samples[kept++] = g_samples[i];
    }
  }
  g_sample_count = kept;
  (*env)->RawMonitorExit(env, g_table);
}

static void sweeper_main(vmtiEnv* env, void* arg) {
  (void)arg;
  for (;;) {
    (*env)->RawMonitorEnter(env, g_sweeper);
    while (!g_stop && !g_sweep_pending && g_gc_requests == 0) {
      /* INTERRUPT: the VM is ending; leave even if VMDeath never says so. */
      if ((*env)->RawMonitorWait(env, g_sweeper, 0) == VMTI_ERROR_INTERRUPT) g_stop = 1;
    }
    const int stop = g_stop, pending = g_sweep_pending, requests = g_gc_requests;
    g_sweep_pending = 0;
    g_gc_requests = 0;
    (*env)->RawMonitorExit(env, g_sweeper);
    if (stop) break;
    /* Never hold a monitor across a collection: GarbageCollectionFinish
     * enters g_sweeper. */
    if (requests > 0 && (*env)->ForceGarbageCollection(env) == VMTI_ERROR_NONE) {
      (*env)->RawMonitorEnter(env, g_sweeper);
      g_forced++;
      (*env)->RawMonitorExit(env, g_sweeper);
    }
    if (pending) {
      sweep(env);
      (*env)->RawMonitorEnter(env, g_sweeper);
      g_sweeps++;
      (*env)->RawMonitorExit(env, g_sweeper);
    }
  }
  (*env)->RawMonitorEnter(env, g_sweeper);
  g_sweeper_done = 1;
  (*env)->RawMonitorNotifyAll(env, g_sweeper);
  (*env)->RawMonitorExit(env, g_sweeper);
}

static void vm_init(vmtiEnv* env, vmtiThread thread) {
  (void)thread;
  /* JVMTI: NewObject(java/lang/Thread) + RunAgentThread(jthread, ...). */
  CHECK_OK((*env)->RunAgentThread(env, "heapsampler-sweeper", sweeper_main, NULL, NULL));
}

static int by_line(const void* a, const void* b) {
  const Site* x = (const Site*)a;
  const Site* y = (const Site*)b;
  if (x->line != y->line) return x->line < y->line ? -1 : 1;
  return strcmp(x->class_name, y->class_name);
}

static void vm_death(vmtiEnv* env) {
  /* Stop the sweeper and wait until it has left. */
  (*env)->RawMonitorEnter(env, g_sweeper);
  g_stop = 1;
  (*env)->RawMonitorNotifyAll(env, g_sweeper);
  while (!g_sweeper_done) CHECK_OK((*env)->RawMonitorWait(env, g_sweeper, 0));
  (*env)->RawMonitorExit(env, g_sweeper);
  /* A last collection (on this thread, which may still collect) and sweep. */
  CHECK_OK((*env)->ForceGarbageCollection(env));
  sweep(env);

  (*env)->RawMonitorEnter(env, g_table);
  /* Merge sites that differ only in location (one line may allocate at
   * several instructions) before printing. */
  Site merged[MAX_SITES];
  int n = 0;
  for (int i = 0; i < g_site_count; ++i) {
    int j = 0;
    while (j < n && !(merged[j].line == g_sites[i].line &&
                      strcmp(merged[j].class_name, g_sites[i].class_name) == 0)) {
      ++j;
    }
    if (j == n) {
      merged[n++] = g_sites[i];
    } else {
      merged[j].samples += g_sites[i].samples;
      merged[j].bytes += g_sites[i].bytes;
      merged[j].live += g_sites[i].live;
      merged[j].dropped += g_sites[i].dropped;
    }
  }
  qsort(merged, (size_t)n, sizeof merged[0], by_line);
  long long live = 0, dropped = 0;
  for (int i = 0; i < n; ++i) {
    printf("site %d %s samples %lld bytes %lld live %lld\n", (int)merged[i].line,
           merged[i].class_name, merged[i].samples, merged[i].bytes, merged[i].live);
    live += merged[i].live;
    dropped += merged[i].dropped;
  }
  if ((long long)g_sample_count != live) fail_locked("table size != live", (long long)g_sample_count);
  if (live + dropped != g_total_samples) fail_locked("live + dropped != samples", live + dropped);
  printf("samples %lld live %lld dropped %lld\n", g_total_samples, live, dropped);
  printf("sweeper: forced collections %s, sweeps %s\n", g_forced > 0 ? ">0" : "0",
         g_sweeps > 0 ? ">0" : "0");
  printf("callbacks: waited for a collection %lld, handles ok %lld\n", g_waits, g_handles_ok);
  for (int i = 0; i < g_failures && i < MAX_FAILURES; ++i) {
    printf("FAIL heapsampler: %s\n", g_failure[i]);
  }
  if (g_failures == 0) printf("PASS heapsampler\n");
  fflush(stdout);
  (*env)->RawMonitorExit(env, g_table);
}

static int parse_options(char* options) {
  if (options == NULL) return 0;
  char* save = NULL;
  for (char* t = strtok_r(options, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
    char* end = NULL;
    if (strncmp(t, "interval=", 9) == 0) {
      g_interval = (vmtiInt)strtol(t + 9, &end, 10);
    } else if (strncmp(t, "gc_every=", 9) == 0) {
      g_gc_every = strtoll(t + 9, &end, 10);
    } else if (strncmp(t, "wait_every=", 11) == 0) {
      g_wait_every = strtoll(t + 11, &end, 10);
    }
    if (end == NULL || *end != '\0') {
      fprintf(stderr, "heapsampler: bad option '%s'\n", t);
      return 1;
    }
  }
  return 0;
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (parse_options(options) != 0) return 1;
  /* JVMTI: vm->GetEnv((void**)&jvmti, JVMTI_VERSION_11). */
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_INIT, VMTI_EVENT_VM_DEATH,
                                      VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                      VMTI_EVENT_GARBAGE_COLLECTION_FINISH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC | TA_GC_EVENTS,
                      .callbacks = {.VMInit = vm_init, .VMDeath = vm_death,
                                    .SampledObjectAlloc = sampled_object_alloc,
                                    .GarbageCollectionFinish = gc_finish},
                      .set_interval = TA_SET_INTERVAL, .interval = g_interval, .events = kEvents};
  /* The monitors exist before any callback can run. */
  g_env = TestAgentEnv(vm);
  if (!g_env || (*g_env)->CreateRawMonitor(g_env, "heapsampler table", &g_table) != VMTI_ERROR_NONE ||
      (*g_env)->CreateRawMonitor(g_env, "heapsampler sweeper", &g_sweeper) != VMTI_ERROR_NONE ||
      TestAgentSetUp(g_env, &s) != VMTI_ERROR_NONE) {
    fprintf(stderr, "heapsampler: cannot set up the environment\n");
    return 1;
  }
  return 0;
}
