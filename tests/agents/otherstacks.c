/*
 * otherstacks: stacks of other threads and thread parents (the second
 * edition's "Stacks of any thread" and "Threads that spawn threads").
 *
 * ThreadStart records every thread's handle by name. In the callback for
 * the one sampled Snap (interval 0, set with SetHeapSamplingRate), on main,
 * it reads every thread's stack with GetAllStackTraces and checks that
 * GetStackTrace(thread), GetFrameCount(thread) and GetThreadListStackTraces
 * give the same frames; it renders them as `function:line` frames,
 * innermost first, and GetThreadParent for every thread. At VMDeath it
 * prints what it saw (the .mv file's expectations) and PASS or FAIL lines.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_THREADS 8
#define OUT_LEN 2048

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static vmtiThread g_threads[MAX_THREADS]; /* by index: main = 0, thread-n = n */
static char g_out[OUT_LEN];
static int g_failures;
static char g_fail[8][256];
static int g_snapped;

static void fail(const char* what, long long a, long long b) {
  pthread_mutex_lock(&g_lock);
  if (g_failures < 8) snprintf(g_fail[g_failures], sizeof g_fail[0], "%s (%lld, %lld)", what, a, b);
  g_failures++;
  pthread_mutex_unlock(&g_lock);
}

#define CHECK_ERR(call, want)                              \
  do {                                                     \
    vmtiError e_ = (call);                                 \
    if (e_ != (want)) fail(#call, (long long)e_, (want));  \
  } while (0)

static void append(const char* s) {
  size_t n = strlen(g_out);
  snprintf(g_out + n, sizeof g_out - n, "%s", s);
}

static void thread_name(vmtiEnv* env, vmtiThread t, char* buf, size_t len) {
  vmtiThreadInfo info;
  memset(&info, 0, sizeof info);
  if (t == NULL) {
    snprintf(buf, len, "-");
    return;
  }
  if ((*env)->GetThreadInfo(env, t, &info) != VMTI_ERROR_NONE || info.name == NULL) {
    snprintf(buf, len, "?");
    return;
  }
  snprintf(buf, len, "%s", info.name);
  (*env)->Deallocate(env, (unsigned char*)info.name);
}

/* "fn:line < fn:line", or "-" for no frames. */
static void render(vmtiEnv* env, const vmtiFrameInfo* frames, int n, char* buf, size_t len) {
  buf[0] = 0;
  if (n == 0) snprintf(buf, len, "-");
  for (int i = 0; i < n; i++) {
    char* name = NULL;
    vmtiInt line = 0;
    (*env)->GetMethodName(env, frames[i].method, &name, NULL, NULL);
    (*env)->GetLineNumber(env, frames[i].method, frames[i].location, &line);
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s:%d", i ? " < " : "", name ? name : "?", (int)line);
    (*env)->Deallocate(env, (unsigned char*)name);
  }
}

static int same(const vmtiFrameInfo* a, const vmtiFrameInfo* b, int n) {
  for (int i = 0; i < n; i++) {
    if (a[i].method != b[i].method || a[i].location != b[i].location) return 0;
  }
  return 1;
}

static void on_thread_start(vmtiEnv* env, vmtiThread thread) {
  vmtiThreadInfo info;
  memset(&info, 0, sizeof info);
  if ((*env)->GetThreadInfo(env, thread, &info) != VMTI_ERROR_NONE) return;
  if (info.id > 0 && info.id < MAX_THREADS) g_threads[info.id] = thread;
  (*env)->Deallocate(env, (unsigned char*)info.name);
}

static void on_vm_init(vmtiEnv* env, vmtiThread thread) {
  (void)env;
  g_threads[0] = thread;
}

static void snapshot(vmtiEnv* env) {
  char buf[512];
  char name[32];
  vmtiStackInfo* all = NULL;
  vmtiInt n = 0;
  CHECK_ERR((*env)->GetAllStackTraces(env, 16, &all, &n), VMTI_ERROR_NONE);
  if (all == NULL) return;
  for (int i = 0; i < n; i++) {
    thread_name(env, all[i].thread, name, sizeof name);
    render(env, all[i].frame_buffer, all[i].frame_count, buf, sizeof buf);
    append(name);
    append(" ");
    append(buf);
    append("\n");
    /* The same thread, read on its own. */
    vmtiFrameInfo frames[16];
    vmtiInt count = -1;
    CHECK_ERR((*env)->GetStackTrace(env, all[i].thread, 0, 16, frames, &count), VMTI_ERROR_NONE);
    if (count != all[i].frame_count || !same(frames, all[i].frame_buffer, count)) {
      fail("GetStackTrace(thread) differs from GetAllStackTraces", i, count);
    }
    CHECK_ERR((*env)->GetFrameCount(env, all[i].thread, &count), VMTI_ERROR_NONE);
    if (count != all[i].frame_count) fail("GetFrameCount differs", i, count);
    if (all[i].state != 0) fail("state", i, all[i].state);
  }
  if (n != 3) fail("threads in GetAllStackTraces", n, 3);
  (*env)->Deallocate(env, (unsigned char*)all);

  /* A list, a finished thread (thread-1) among them: no frames for it. */
  vmtiThread list[3] = {g_threads[3], g_threads[1], g_threads[2]};
  vmtiStackInfo* some = NULL;
  CHECK_ERR((*env)->GetThreadListStackTraces(env, 3, list, 16, &some), VMTI_ERROR_NONE);
  if (some != NULL) {
    append("list");
    for (int i = 0; i < 3; i++) {
      if (some[i].thread != list[i]) fail("list order", i, 0);
      thread_name(env, some[i].thread, name, sizeof name);
      render(env, some[i].frame_buffer, some[i].frame_count, buf, sizeof buf);
      append(i ? " | " : " ");
      append(name);
      append(" ");
      append(buf);
    }
    append("\n");
    (*env)->Deallocate(env, (unsigned char*)some);
  }

  /* A finished thread has no stack to read. */
  vmtiFrameInfo frames[4];
  vmtiInt count = 0;
  CHECK_ERR((*env)->GetStackTrace(env, g_threads[1], 0, 4, frames, &count),
            VMTI_ERROR_THREAD_NOT_ALIVE);
  CHECK_ERR((*env)->GetFrameCount(env, g_threads[1], &count), VMTI_ERROR_THREAD_NOT_ALIVE);
  CHECK_ERR((*env)->GetFrameCount(env, NULL, &count), VMTI_ERROR_NONE);
  if (count != 1) fail("GetFrameCount(NULL) on main", count, 1);
  CHECK_ERR((*env)->GetFrameCount(env, NULL, NULL), VMTI_ERROR_NULL_POINTER);
  CHECK_ERR((*env)->GetAllStackTraces(env, -1, &all, &n), VMTI_ERROR_ILLEGAL_ARGUMENT);
  CHECK_ERR((*env)->GetAllStackTraces(env, 4, NULL, &n), VMTI_ERROR_NULL_POINTER);
  CHECK_ERR((*env)->GetThreadListStackTraces(env, 1, list, -1, &some), VMTI_ERROR_ILLEGAL_ARGUMENT);
  vmtiThread bogus = (vmtiThread)(void*)&g_out;
  CHECK_ERR((*env)->GetThreadListStackTraces(env, 1, &bogus, 4, &some), VMTI_ERROR_INVALID_THREAD);
  CHECK_ERR((*env)->GetStackTrace(env, bogus, 0, 4, frames, &count), VMTI_ERROR_INVALID_THREAD);

  /* Parents: main has none; a finished parent still answers. */
  append("parents");
  for (int i = 0; i < 4; i++) {
    vmtiThread parent = (vmtiThread)(void*)&g_out;
    char pname[32];
    CHECK_ERR((*env)->GetThreadParent(env, g_threads[i], &parent), VMTI_ERROR_NONE);
    thread_name(env, g_threads[i], name, sizeof name);
    thread_name(env, parent, pname, sizeof pname);
    snprintf(buf, sizeof buf, " %s=%s", name, pname);
    append(buf);
  }
  append("\n");
  vmtiThread p;
  CHECK_ERR((*env)->GetThreadParent(env, bogus, &p), VMTI_ERROR_INVALID_THREAD);
  CHECK_ERR((*env)->GetThreadParent(env, NULL, NULL), VMTI_ERROR_NULL_POINTER);
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)thread;
  (void)object;
  (void)size;
  char* sig = NULL;
  if ((*env)->GetClassSignature(env, klass, &sig, NULL) != VMTI_ERROR_NONE) return;
  int snap = sig != NULL && strcmp(sig, "Snap") == 0;
  (*env)->Deallocate(env, (unsigned char*)sig);
  if (!snap || g_snapped++) return;
  snapshot(env);
}

static void on_vm_death(vmtiEnv* env) {
  (void)env;
  fputs(g_out, stdout);
  if (g_snapped != 1) fail("Snap samples", g_snapped, 1);
  if (g_failures == 0) {
    printf("PASS otherstacks\n");
  } else {
    for (int i = 0; i < g_failures && i < 8; i++) printf("FAIL otherstacks: %s\n", g_fail[i]);
  }
  fflush(stdout);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)options;
  (void)reserved;
  vmtiEnv* env = TestAgentEnv(vm);
  if (!env) return 1;
  /* SetHeapSamplingRate needs the capability, as SetHeapSamplingInterval does. */
  if ((*env)->SetHeapSamplingRate(env, 0) != VMTI_ERROR_MUST_POSSESS_CAPABILITY) return 1;
  vmtiCapabilities caps;
  TestAgentCapabilities(TA_SAMPLED_ALLOC, &caps);
  if ((*env)->AddCapabilities(env, &caps) != VMTI_ERROR_NONE) return 1;
  if ((*env)->SetHeapSamplingRate(env, -1) != VMTI_ERROR_ILLEGAL_ARGUMENT) return 1;
  if ((*env)->SetHeapSamplingRate(env, 0) != VMTI_ERROR_NONE) return 1;
  vmtiInt interval = -1;
  if ((*env)->GetHeapSamplingInterval(env, &interval) != VMTI_ERROR_NONE || interval != 0) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_INIT, VMTI_EVENT_THREAD_START,
                                      VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.callbacks = {.VMInit = &on_vm_init, .ThreadStart = &on_thread_start,
                                    .SampledObjectAlloc = &on_sample, .VMDeath = &on_vm_death},
                      .events = kEvents};
  return TestAgentSetUp(env, &s) == VMTI_ERROR_NONE ? 0 : 1;
}
