/*
 * stacks: stack traces coherent with the allocating code (HotSpot's
 * HeapMonitorTest frame checks), at interval 0.
 *
 * For every sample of a class named in the options (default Leaf, Array,
 * Bytes, String) the agent takes GetStackTrace(NULL, 0, 64) in the callback
 * and renders it as one line:
 *     Leaf 24 | inner(1) stacks.mv:12 < middle(1) stacks.mv:17 < main(0) stacks.mv:30
 * (method name, the arity GetMethodName gives as signature "(n)", the
 * source file's base name from GetMethodSourceFile, and GetLineNumber of the
 * frame's location). It also checks, for the same stack:
 *   - GetMethodSourceFile is the same path for every frame of the program;
 *   - GetStackTrace with start_depth 1, with max_frames 2, with
 *     start_depth -1 (the outermost frame) and -depth return the matching
 *     slices of the full trace;
 *   - the thread argument is the current thread.
 * Lines are buffered per thread (the thread's name first) and printed at
 * VMDeath sorted by thread, in allocation order within a thread, so
 * multi-threaded programs print deterministically.
 *
 * Options: classes=A+B+C (which classes to report).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_LINES 256
#define LINE_LEN 512

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct {
  char thread[32];
  int seq;
  char text[LINE_LEN];
} Line;
static Line g_lines[MAX_LINES];
static int g_nlines;
static int g_failures;
static char g_fail[8][256];
static char g_classes[256] = "+Leaf+Array+Bytes+String+";
static char g_source[512];

static void fail(const char* what, long long a, long long b) {
  pthread_mutex_lock(&g_lock);
  if (g_failures < 8) snprintf(g_fail[g_failures], sizeof g_fail[0], "%s (%lld, %lld)", what, a, b);
  g_failures++;
  pthread_mutex_unlock(&g_lock);
}

static const char* base_name(const char* p) {
  const char* s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static int same_frames(const vmtiFrameInfo* a, const vmtiFrameInfo* b, int n) {
  for (int i = 0; i < n; i++)
    if (a[i].method != b[i].method || a[i].location != b[i].location) return 0;
  return 1;
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass, vmtiLong size) {
  (void)object;
  char* sig = NULL;
  if ((*env)->GetClassSignature(env, klass, &sig, NULL) != VMTI_ERROR_NONE || !sig) {
    fail("GetClassSignature", 0, 0);
    return;
  }
  char cls[40];
  snprintf(cls, sizeof cls, "+%s+", sig);
  (*env)->Deallocate(env, (unsigned char*)sig);
  if (!strstr(g_classes, cls)) return;
  cls[strlen(cls) - 1] = 0;

  vmtiThreadInfo ti;
  memset(&ti, 0, sizeof ti);
  char tname[32] = "?";
  if ((*env)->GetThreadInfo(env, thread, &ti) == VMTI_ERROR_NONE && ti.name) {
    snprintf(tname, sizeof tname, "%s", ti.name);
    (*env)->Deallocate(env, (unsigned char*)ti.name);
  } else {
    fail("GetThreadInfo", 0, 0);
  }
  {
    vmtiThread cur = NULL;
    memset(&ti, 0, sizeof ti);
    if ((*env)->GetCurrentThread(env, &cur) != VMTI_ERROR_NONE ||
        (*env)->GetThreadInfo(env, cur, &ti) != VMTI_ERROR_NONE || !ti.name || strcmp(ti.name, tname) != 0)
      fail("the callback's thread is not the current thread", 0, 0);
    if (ti.name) (*env)->Deallocate(env, (unsigned char*)ti.name);
  }

  vmtiFrameInfo frames[64], part[64];
  vmtiInt depth = 0, n = 0;
  vmtiError e = (*env)->GetStackTrace(env, NULL, 0, 64, frames, &depth);
  if (e != VMTI_ERROR_NONE) {
    fail("GetStackTrace", e, 0);
    return;
  }
  /* slices */
  if (depth >= 2) {
    e = (*env)->GetStackTrace(env, NULL, 1, 64, part, &n);
    if (e != VMTI_ERROR_NONE || n != depth - 1 || !same_frames(part, frames + 1, n))
      fail("GetStackTrace start_depth 1", e, n);
    e = (*env)->GetStackTrace(env, NULL, 0, 2, part, &n);
    if (e != VMTI_ERROR_NONE || n != 2 || !same_frames(part, frames, 2)) fail("GetStackTrace max_frames 2", e, n);
  }
  if (depth >= 1) {
    e = (*env)->GetStackTrace(env, NULL, -1, 64, part, &n);
    if (e != VMTI_ERROR_NONE || n != 1 || !same_frames(part, frames + depth - 1, 1))
      fail("GetStackTrace start_depth -1", e, n);
    e = (*env)->GetStackTrace(env, NULL, -depth, 64, part, &n);
    if (e != VMTI_ERROR_NONE || n != depth || !same_frames(part, frames, depth))
      fail("GetStackTrace start_depth -depth", e, n);
  }

  char text[LINE_LEN];
  int len = snprintf(text, sizeof text, "%s %lld |", cls + 1, (long long)size); /* cls is "+Name" */
  for (int i = 0; i < depth && len < (int)sizeof text - 1; i++) {
    char* name = NULL;
    char* msig = NULL;
    char* src = NULL;
    vmtiInt line = -1;
    if ((*env)->GetMethodName(env, frames[i].method, &name, &msig, NULL) != VMTI_ERROR_NONE)
      fail("GetMethodName", i, 0);
    if ((*env)->GetMethodSourceFile(env, frames[i].method, &src) != VMTI_ERROR_NONE) fail("GetMethodSourceFile", i, 0);
    if ((*env)->GetLineNumber(env, frames[i].method, frames[i].location, &line) != VMTI_ERROR_NONE)
      fail("GetLineNumber", i, (long long)frames[i].location);
    if (src) {
      pthread_mutex_lock(&g_lock);
      if (!g_source[0]) snprintf(g_source, sizeof g_source, "%s", src);
      int differs = strcmp(g_source, src) != 0;
      pthread_mutex_unlock(&g_lock);
      if (differs) fail("two source files for one program", i, 0);
    }
    len += snprintf(text + len, sizeof text - (size_t)len, "%s %s%s %s:%d", i ? " <" : "", name ? name : "?",
                    msig ? msig : "?", src ? base_name(src) : "?", (int)line);
    if (name) (*env)->Deallocate(env, (unsigned char*)name);
    if (msig) (*env)->Deallocate(env, (unsigned char*)msig);
    if (src) (*env)->Deallocate(env, (unsigned char*)src);
  }
  pthread_mutex_lock(&g_lock);
  if (g_nlines < MAX_LINES) {
    snprintf(g_lines[g_nlines].thread, sizeof g_lines[0].thread, "%s", tname);
    g_lines[g_nlines].seq = g_nlines;
    snprintf(g_lines[g_nlines].text, LINE_LEN, "%s", text);
    g_nlines++;
  }
  pthread_mutex_unlock(&g_lock);
}

static int line_cmp(const void* a, const void* b) {
  const Line* la = (const Line*)a;
  const Line* lb = (const Line*)b;
  const char* ta = la->thread;
  const char* tb = lb->thread;
  int c;
  int ma = !strcmp(ta, "main"), mb = !strcmp(tb, "main");
  if (ma != mb) return ma ? -1 : 1;
  if (!ma && (c = atoi(ta + 7) - atoi(tb + 7)) != 0) return c;
  /* same thread: allocation order */
  return la->seq - lb->seq;
}

static void on_death(vmtiEnv* env) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  qsort(g_lines, (size_t)g_nlines, sizeof g_lines[0], line_cmp);
  for (int i = 0; i < g_nlines; i++) printf("%s: %s\n", g_lines[i].thread, g_lines[i].text);
  for (int i = 0; i < g_failures && i < 8; i++) printf("FAIL stacks: %s\n", g_fail[i]);
  if (!g_failures) printf("PASS stacks\n");
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (options && !strncmp(options, "classes=", 8)) snprintf(g_classes, sizeof g_classes, "+%s+", options + 8);
  static const vmtiEvent kEvents[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death},
                      .set_interval = TA_SET_INTERVAL, .interval = 0, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
