/*
 * badargs: every function's error paths (HotSpot's IllegalArgumentTest and
 * NoCapabilityTest, widened to the whole API): NULL out-pointers, illegal
 * values, missing capabilities (never added, and after
 * RelinquishCapabilities), the wrong phase (LIVE-only functions in ONLOAD,
 * everything but the raw functions inside GarbageCollectionStart/Finish),
 * an unknown version, bad event types and modes, garbage and dead thread,
 * object, weak, class and method handles, and a disposed environment.
 * No call may crash; each returns exactly the code the lead fixed.
 *
 * Checks run at fixed points, each once:
 *   onload  Agent_OnLoad (ONLOAD phase)
 *   init    VMInit (LIVE)
 *   sample  the first SampledObjectAlloc (interval 0)
 *   later   the second SampledObjectAlloc: the first one's object handle
 *           is dead now
 *   thread  ThreadStart of thread-1: main is alive but not current
 *   gc      the first GarbageCollectionStart and GarbageCollectionFinish
 *           (results recorded lock-free, checked at VMDeath)
 *   death   VMDeath: thread-1 has finished, the first object was collected
 * At VMDeath: `stages ...` (those that ran), FAIL lines, `PASS badargs`.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmti/vmti.h"

#define MAX_FAILS 40

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_fails[MAX_FAILS][512]; /* room for the longest call text: no truncation */
static int g_nfails;
static int g_checks;

static vmtiEnv* g_env;  /* all capabilities */
static vmtiEnv* g_env2; /* no capabilities */
static unsigned char g_garbage[512];
#define GARBAGE(type) ((type)(void*)(g_garbage + 64))

enum { ST_ONLOAD, ST_INIT, ST_SAMPLE, ST_LATER, ST_THREAD, ST_GC, ST_DEATH, ST_COUNT };
static const char* kStageNames[ST_COUNT] = {"onload", "init", "sample", "later", "thread", "gc", "death"};
static int g_stage_ran[ST_COUNT];

static vmtiThread g_main_thread;
static vmtiThread g_thread1;
static vmtiObject g_saved_object;
static vmtiClass g_saved_class;
static vmtiMethodID g_saved_method;
static vmtiWeak g_weak;
static long long g_samples;
static int g_disposed_callback_ran; /* atomic */

/* GC callbacks record here (no locks inside a collection) */
enum { GC_PHASE, GC_TIME, GC_ALLOC, GC_DEALLOC, GC_LS, GC_ERRNAME, GC_CURTHREAD, GC_SETMODE, GC_FORCEGC,
       GC_GETINTERVAL, GC_STACK, GC_N };
static const char* kGcNames[GC_N] = {"GetPhase", "GetTime", "Allocate", "Deallocate",
                                     "GetEnvironmentLocalStorage", "GetErrorName", "GetCurrentThread",
                                     "SetEventNotificationMode", "ForceGarbageCollection",
                                     "GetHeapSamplingInterval", "GetStackTrace"};
static const vmtiError kGcWant[GC_N] = {VMTI_ERROR_NONE, VMTI_ERROR_NONE, VMTI_ERROR_NONE, VMTI_ERROR_NONE,
                                        VMTI_ERROR_NONE, VMTI_ERROR_NONE, VMTI_ERROR_WRONG_PHASE,
                                        VMTI_ERROR_WRONG_PHASE, VMTI_ERROR_WRONG_PHASE,
                                        VMTI_ERROR_WRONG_PHASE, VMTI_ERROR_WRONG_PHASE};
static int g_gc_start_result[GC_N];
static int g_gc_finish_result[GC_N];
static int g_gc_start_done, g_gc_finish_done; /* atomic */

static void record(int line, const char* what, long long got, long long want) {
  pthread_mutex_lock(&g_lock);
  if (g_nfails < MAX_FAILS)
    snprintf(g_fails[g_nfails], sizeof g_fails[0], "line %d: %s: got %lld want %lld", line, what, got, want);
  g_nfails++;
  pthread_mutex_unlock(&g_lock);
}

static void check(int line, const char* what, vmtiError got, vmtiError want) {
  __atomic_add_fetch(&g_checks, 1, __ATOMIC_RELAXED);
  if (got != want) record(line, what, got, want);
}
static void check_true(int line, const char* what, int cond) {
  __atomic_add_fetch(&g_checks, 1, __ATOMIC_RELAXED);
  if (!cond) record(line, what, 0, 1);
}
#define EXPECT(call, want) check(__LINE__, #call, (call), (want))
#define EXPECT_OK(call) check(__LINE__, #call, (call), VMTI_ERROR_NONE)
#define TRUE(cond) check_true(__LINE__, #cond, (cond))

static void dealloc(vmtiEnv* env, void* p) {
  if (p) EXPECT_OK((*env)->Deallocate(env, (unsigned char*)p));
}

static int thread_is(vmtiEnv* env, vmtiThread t, const char* name, long long id) {
  vmtiThreadInfo ti;
  memset(&ti, 0, sizeof ti);
  vmtiError e = (*env)->GetThreadInfo(env, t, &ti);
  if (e != VMTI_ERROR_NONE) return 0;
  int r = ti.name && !strcmp(ti.name, name) && ti.id == id;
  dealloc(env, ti.name);
  return r;
}

/* ---- a disposed environment's callback must never run ---------------- */

static void on_sample_disposed(vmtiEnv* env, vmtiThread t, vmtiObject o, vmtiClass k, vmtiLong s) {
  (void)env; (void)t; (void)o; (void)k; (void)s;
  __atomic_store_n(&g_disposed_callback_ran, 1, __ATOMIC_RELAXED);
}

/* ---- LIVE-phase checks that need no object --------------------------- */

static void checks_without_object(vmtiEnv* env) {
  vmtiFrameInfo frames[8];
  vmtiInt count = 0;
  vmtiThreadInfo ti;
  char* s = NULL;
  vmtiInt line = 0;
  vmtiClass k = NULL;
  vmtiLong l = 0;
  vmtiBool b = 0;
  vmtiWeak w = NULL;
  vmtiGeneration g = 0;

  EXPECT((*env)->GetStackTrace(env, NULL, 0, -1, frames, &count), VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT((*env)->GetStackTrace(env, NULL, 0, 8, NULL, &count), VMTI_ERROR_NULL_POINTER);
  EXPECT((*env)->GetStackTrace(env, NULL, 0, 8, frames, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT((*env)->GetStackTrace(env, GARBAGE(vmtiThread), 0, 8, frames, &count), VMTI_ERROR_INVALID_THREAD);
  EXPECT((*env)->GetThreadInfo(env, GARBAGE(vmtiThread), &ti), VMTI_ERROR_INVALID_THREAD);
  EXPECT((*env)->GetThreadInfo(env, NULL, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, GARBAGE(vmtiThread)),
         VMTI_ERROR_INVALID_THREAD);
  EXPECT((*env)->GetMethodName(env, GARBAGE(vmtiMethodID), &s, NULL, NULL), VMTI_ERROR_INVALID_METHODID);
  EXPECT((*env)->GetMethodName(env, NULL, &s, NULL, NULL), VMTI_ERROR_INVALID_METHODID);
  EXPECT((*env)->GetLineNumber(env, GARBAGE(vmtiMethodID), 0, &line), VMTI_ERROR_INVALID_METHODID);
  EXPECT((*env)->GetMethodSourceFile(env, GARBAGE(vmtiMethodID), &s), VMTI_ERROR_INVALID_METHODID);
  EXPECT((*env)->GetClassSignature(env, GARBAGE(vmtiClass), &s, NULL), VMTI_ERROR_INVALID_CLASS);
  EXPECT((*env)->GetClassSignature(env, NULL, &s, NULL), VMTI_ERROR_INVALID_CLASS);
  EXPECT((*env)->GetObjectClass(env, GARBAGE(vmtiObject), &k), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->GetObjectSize(env, GARBAGE(vmtiObject), &l), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->GetObjectSize(env, NULL, &l), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->GetTag(env, GARBAGE(vmtiObject), &l), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->SetTag(env, GARBAGE(vmtiObject), 1), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->NewWeakRef(env, GARBAGE(vmtiObject), &w), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->GetObjectGeneration(env, GARBAGE(vmtiObject), &g), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->IsWeakRefCleared(env, GARBAGE(vmtiWeak), &b), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->IsWeakRefCleared(env, NULL, &b), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->DeleteWeakRef(env, GARBAGE(vmtiWeak)), VMTI_ERROR_INVALID_OBJECT);
  EXPECT((*env)->GetTime(env, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT((*env)->GetCurrentThread(env, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT((*env)->GetAllThreads(env, NULL, NULL), VMTI_ERROR_NULL_POINTER);
  {
    vmtiInt n = 0;
    vmtiThread* ts = NULL;
    EXPECT((*env)->GetAllThreads(env, &n, NULL), VMTI_ERROR_NULL_POINTER);
    EXPECT((*env)->GetAllThreads(env, NULL, &ts), VMTI_ERROR_NULL_POINTER);
  }
}

/* ---- callbacks -------------------------------------------------------- */

static void on_init(vmtiEnv* env, vmtiThread thread) {
  g_stage_ran[ST_INIT] = 1;
  vmtiPhase ph = 0;
  EXPECT_OK((*env)->GetPhase(env, &ph));
  TRUE(ph == VMTI_PHASE_LIVE);
  vmtiThread cur = NULL;
  EXPECT_OK((*env)->GetCurrentThread(env, &cur));
  TRUE(thread_is(env, cur, "main", 0));
  TRUE(thread_is(env, thread, "main", 0));
  TRUE(thread_is(env, NULL, "main", 0));
  g_main_thread = thread;
  {
    vmtiInt n = 0;
    vmtiThread* ts = NULL;
    EXPECT_OK((*env)->GetAllThreads(env, &n, &ts));
    TRUE(n == 1 && ts && thread_is(env, ts[0], "main", 0));
    dealloc(env, ts);
  }
  {
    vmtiLong t1 = 0, t2 = 0;
    EXPECT_OK((*env)->GetTime(env, &t1));
    EXPECT_OK((*env)->GetTime(env, &t2));
    TRUE(t2 >= t1);
  }
  {
    vmtiSampleInfo info;
    EXPECT((*env)->GetSampleInfo(env, &info), VMTI_ERROR_NOT_AVAILABLE); /* outside SampledObjectAlloc */
  }
  checks_without_object(env);
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass, vmtiLong size) {
  pthread_mutex_lock(&g_lock);
  long long n = ++g_samples;
  pthread_mutex_unlock(&g_lock);
  if (n == 1) {
    g_stage_ran[ST_SAMPLE] = 1;
    vmtiSampleInfo info;
    memset(&info, 0, sizeof info);
    EXPECT((*env)->GetSampleInfo(env, NULL), VMTI_ERROR_NULL_POINTER);
    EXPECT_OK((*env)->GetSampleInfo(env, &info));
    TRUE(info.sample_count == 1 && info.interval == 0 && info.weight == (double)size);
    TRUE(info.generation == VMTI_GENERATION_YOUNG);
    vmtiLong l = -1;
    vmtiClass k = NULL;
    vmtiGeneration g = 0;
    EXPECT((*env)->GetObjectSize(env, object, NULL), VMTI_ERROR_NULL_POINTER);
    EXPECT((*env)->GetObjectClass(env, object, NULL), VMTI_ERROR_NULL_POINTER);
    EXPECT((*env)->GetObjectGeneration(env, object, NULL), VMTI_ERROR_NULL_POINTER);
    EXPECT((*env)->GetTag(env, object, NULL), VMTI_ERROR_NULL_POINTER);
    EXPECT((*env)->NewWeakRef(env, object, NULL), VMTI_ERROR_NULL_POINTER);
    EXPECT_OK((*env)->GetObjectSize(env, object, &l));
    TRUE(l == size && size == 32);
    EXPECT_OK((*env)->GetObjectClass(env, object, &k));
    EXPECT_OK((*env)->GetObjectGeneration(env, object, &g));
    TRUE(g == VMTI_GENERATION_YOUNG);
    /* tags */
    EXPECT_OK((*env)->GetTag(env, object, &l));
    TRUE(l == 0);
    EXPECT_OK((*env)->SetTag(env, object, 42));
    EXPECT_OK((*env)->GetTag(env, object, &l));
    TRUE(l == 42);
    EXPECT_OK((*env)->SetTag(env, object, 0));
    EXPECT_OK((*env)->GetTag(env, object, &l));
    TRUE(l == 0);
    EXPECT((*g_env2)->GetTag(g_env2, object, &l), VMTI_ERROR_MUST_POSSESS_CAPABILITY);
    EXPECT((*g_env2)->SetTag(g_env2, object, 1), VMTI_ERROR_MUST_POSSESS_CAPABILITY);
    /* weak refs */
    vmtiBool cleared = 9;
    EXPECT_OK((*env)->NewWeakRef(env, object, &g_weak));
    EXPECT((*env)->IsWeakRefCleared(env, g_weak, NULL), VMTI_ERROR_NULL_POINTER);
    EXPECT_OK((*env)->IsWeakRefCleared(env, g_weak, &cleared));
    TRUE(cleared == 0);
    {
      vmtiWeak w2 = NULL;
      EXPECT_OK((*env)->NewWeakRef(env, object, &w2));
      EXPECT_OK((*env)->DeleteWeakRef(env, w2));
    }
    /* class */
    {
      char* sig = NULL;
      char* gen = (char*)g_garbage;
      EXPECT_OK((*env)->GetClassSignature(env, klass, &sig, &gen));
      TRUE(sig && !strcmp(sig, "Node"));
      TRUE(gen == NULL);
      dealloc(env, sig);
    }
    /* thread argument */
    TRUE(thread_is(env, thread, "main", 0));
    /* stack */
    vmtiFrameInfo frames[64];
    vmtiInt count = 0, c2 = 0;
    EXPECT_OK((*env)->GetStackTrace(env, NULL, 0, 64, frames, &count));
    TRUE(count == 3); /* make < work < main */
    if (count >= 1) {
      vmtiMethodID m = frames[0].method;
      vmtiInt line = 0;
      char* name = NULL;
      char* sig = NULL;
      char* gen = (char*)g_garbage;
      EXPECT_OK((*env)->GetMethodName(env, m, NULL, NULL, NULL));
      EXPECT_OK((*env)->GetMethodName(env, m, &name, &sig, &gen));
      TRUE(name && !strcmp(name, "make"));
      TRUE(sig && !strcmp(sig, "(0)"));
      TRUE(gen == NULL);
      dealloc(env, name);
      dealloc(env, sig);
      EXPECT((*env)->GetLineNumber(env, m, frames[0].location, NULL), VMTI_ERROR_NULL_POINTER);
      EXPECT((*env)->GetLineNumber(env, m, -1, &line), VMTI_ERROR_INVALID_LOCATION);
      EXPECT((*env)->GetLineNumber(env, m, (vmtiLocation)1 << 40, &line), VMTI_ERROR_INVALID_LOCATION);
      EXPECT((*env)->GetMethodSourceFile(env, m, NULL), VMTI_ERROR_NULL_POINTER);
      EXPECT((*env)->GetStackTrace(env, NULL, count + 5, 1, frames, &c2), VMTI_ERROR_ILLEGAL_ARGUMENT);
      EXPECT((*env)->GetStackTrace(env, NULL, -(count + 1), 8, frames, &c2), VMTI_ERROR_ILLEGAL_ARGUMENT);
      EXPECT_OK((*env)->GetStackTrace(env, NULL, -count, 64, frames, &c2));
      TRUE(c2 == count);
      EXPECT_OK((*env)->GetStackTrace(env, NULL, 0, 0, frames, &c2));
      TRUE(c2 == 0);
      g_saved_method = m;
    }
    g_saved_object = object;
    g_saved_class = klass;
    checks_without_object(env);
  } else if (n == 2) {
    g_stage_ran[ST_LATER] = 1;
    vmtiLong l = 0;
    vmtiClass k = NULL;
    vmtiWeak w = NULL;
    EXPECT((*env)->GetObjectSize(env, g_saved_object, &l), VMTI_ERROR_INVALID_OBJECT);
    EXPECT((*env)->GetObjectClass(env, g_saved_object, &k), VMTI_ERROR_INVALID_OBJECT);
    EXPECT((*env)->GetTag(env, g_saved_object, &l), VMTI_ERROR_INVALID_OBJECT);
    EXPECT((*env)->NewWeakRef(env, g_saved_object, &w), VMTI_ERROR_INVALID_OBJECT);
    char* s = NULL;
    EXPECT_OK((*env)->GetClassSignature(env, g_saved_class, &s, NULL));
    TRUE(s && !strcmp(s, "Node"));
    dealloc(env, s);
    s = NULL;
    EXPECT_OK((*env)->GetMethodName(env, g_saved_method, &s, NULL, NULL));
    TRUE(s && !strcmp(s, "make"));
    dealloc(env, s);
  }
}

static void on_thread_start(vmtiEnv* env, vmtiThread thread) {
  if (!thread_is(env, thread, "thread-1", 1)) return;
  g_stage_ran[ST_THREAD] = 1;
  g_thread1 = thread;
  vmtiFrameInfo frames[8];
  vmtiInt count = 0;
  /* Another live thread's stack is read at a safepoint (main's, here). */
  EXPECT_OK((*env)->GetStackTrace(env, g_main_thread, 0, 8, frames, &count));
  TRUE(count >= 1);
  {
    vmtiSampleInfo info;
    EXPECT((*env)->GetSampleInfo(env, &info), VMTI_ERROR_NOT_AVAILABLE); /* not a SampledObjectAlloc */
  }
  TRUE(thread_is(env, g_main_thread, "main", 0));
  vmtiInt n = 0;
  vmtiThread* ts = NULL;
  EXPECT_OK((*env)->GetAllThreads(env, &n, &ts));
  TRUE(n == 2);
  dealloc(env, ts);
}

static void gc_checks(vmtiEnv* env, int* out) {
  vmtiPhase ph = 0;
  vmtiLong t = 0;
  unsigned char* mem = NULL;
  void* ls = NULL;
  char* name = NULL;
  vmtiThread th = NULL;
  vmtiInt iv = 0;
  vmtiFrameInfo frames[4];
  vmtiInt count = 0;
  out[GC_PHASE] = (*env)->GetPhase(env, &ph);
  if (out[GC_PHASE] == VMTI_ERROR_NONE && ph != VMTI_PHASE_LIVE) out[GC_PHASE] = 1000 + ph;
  out[GC_TIME] = (*env)->GetTime(env, &t);
  out[GC_ALLOC] = (*env)->Allocate(env, 64, &mem);
  out[GC_DEALLOC] = mem ? (int)(*env)->Deallocate(env, mem) : -1;
  out[GC_LS] = (*env)->GetEnvironmentLocalStorage(env, &ls);
  out[GC_ERRNAME] = (*env)->GetErrorName(env, VMTI_ERROR_NONE, &name);
  if (name) (*env)->Deallocate(env, (unsigned char*)name);
  out[GC_CURTHREAD] = (*env)->GetCurrentThread(env, &th);
  out[GC_SETMODE] = (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_VM_DEATH, NULL);
  out[GC_FORCEGC] = (*env)->ForceGarbageCollection(env);
  out[GC_GETINTERVAL] = (*env)->GetHeapSamplingInterval(env, &iv);
  out[GC_STACK] = (*env)->GetStackTrace(env, NULL, 0, 4, frames, &count);
}

static void on_gc_start(vmtiEnv* env) {
  if (__atomic_load_n(&g_gc_start_done, __ATOMIC_ACQUIRE)) return;
  gc_checks(env, g_gc_start_result);
  __atomic_store_n(&g_gc_start_done, 1, __ATOMIC_RELEASE);
}

static void on_gc_finish(vmtiEnv* env) {
  if (__atomic_load_n(&g_gc_finish_done, __ATOMIC_ACQUIRE)) return;
  gc_checks(env, g_gc_finish_result);
  __atomic_store_n(&g_gc_finish_done, 1, __ATOMIC_RELEASE);
}

static void on_death(vmtiEnv* env) {
  g_stage_ran[ST_DEATH] = 1;
  if (g_thread1) {
    /* GetThreadInfo may still name a finished thread (JVMTI does), or
     * report it not alive; anything else is wrong. Functions that act on
     * the thread must say THREAD_NOT_ALIVE. */
    vmtiThreadInfo ti;
    memset(&ti, 0, sizeof ti);
    vmtiError e = (*env)->GetThreadInfo(env, g_thread1, &ti);
    TRUE(e == VMTI_ERROR_THREAD_NOT_ALIVE || (e == VMTI_ERROR_NONE && ti.name && !strcmp(ti.name, "thread-1")));
    if (e == VMTI_ERROR_NONE) dealloc(env, ti.name);
    EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, g_thread1),
           VMTI_ERROR_THREAD_NOT_ALIVE);
    vmtiFrameInfo frames[4];
    vmtiInt count = 0;
    EXPECT((*env)->GetStackTrace(env, g_thread1, 0, 4, frames, &count), VMTI_ERROR_THREAD_NOT_ALIVE);
  }
  if (g_weak) {
    vmtiBool cleared = 9;
    EXPECT_OK((*env)->IsWeakRefCleared(env, g_weak, &cleared));
    TRUE(cleared == 1); /* the program dropped the first object and called gc() */
    EXPECT_OK((*env)->DeleteWeakRef(env, g_weak));
  }
  TRUE(!__atomic_load_n(&g_disposed_callback_ran, __ATOMIC_RELAXED));
  if (__atomic_load_n(&g_gc_start_done, __ATOMIC_ACQUIRE) && __atomic_load_n(&g_gc_finish_done, __ATOMIC_ACQUIRE)) {
    g_stage_ran[ST_GC] = 1;
    for (int i = 0; i < GC_N; i++) {
      char what[128];
      snprintf(what, sizeof what, "%s in GarbageCollectionStart", kGcNames[i]);
      check(__LINE__, what, (vmtiError)g_gc_start_result[i], kGcWant[i]);
      snprintf(what, sizeof what, "%s in GarbageCollectionFinish", kGcNames[i]);
      check(__LINE__, what, (vmtiError)g_gc_finish_result[i], kGcWant[i]);
    }
  }
  pthread_mutex_lock(&g_lock);
  printf("stages");
  for (int i = 0; i < ST_COUNT; i++)
    if (g_stage_ran[i]) printf(" %s", kStageNames[i]);
  printf("\n");
  for (int i = 0; i < g_nfails && i < MAX_FAILS; i++) printf("FAIL badargs %s\n", g_fails[i]);
  if (g_nfails) printf("FAIL badargs: %d of %d checks failed\n", g_nfails, g_checks);
  else printf("PASS badargs\n");
  fprintf(stderr, "badargs: %d checks\n", g_checks);
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

/* ---- ONLOAD ------------------------------------------------------------ */

static void onload_checks(vmtiVM* vm, vmtiEnv* env) {
  vmtiEnv* other = NULL;
  vmtiInt v = 0;
  vmtiPhase ph = 0;
  char* name = NULL;
  unsigned char* mem = NULL;
  void* ls = (void*)g_garbage;
  vmtiCapabilities caps, pot, none;
  memset(&none, 0, sizeof none);

  EXPECT((*vm)->GetEnv(vm, (void**)&other, 0x12345678), VMTI_ERROR_UNSUPPORTED_VERSION);
  EXPECT((*vm)->GetEnv(vm, (void**)&other, 0), VMTI_ERROR_UNSUPPORTED_VERSION);
  EXPECT((*vm)->GetEnv(vm, NULL, VMTI_VERSION_1), VMTI_ERROR_NULL_POINTER);

  EXPECT((*env)->GetVersionNumber(env, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT_OK((*env)->GetVersionNumber(env, &v));
  TRUE(v == VMTI_VERSION_1);
  EXPECT((*env)->GetPhase(env, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT_OK((*env)->GetPhase(env, &ph));
  TRUE(ph == VMTI_PHASE_ONLOAD);

  EXPECT_OK((*env)->GetErrorName(env, VMTI_ERROR_NONE, &name));
  TRUE(name && !strcmp(name, "VMTI_ERROR_NONE"));
  dealloc(env, name);
  name = NULL;
  EXPECT_OK((*env)->GetErrorName(env, VMTI_ERROR_ILLEGAL_ARGUMENT, &name));
  TRUE(name && !strcmp(name, "VMTI_ERROR_ILLEGAL_ARGUMENT"));
  dealloc(env, name);
  name = NULL;
  EXPECT_OK((*env)->GetErrorName(env, VMTI_ERROR_INVALID_ENVIRONMENT, &name));
  TRUE(name && !strcmp(name, "VMTI_ERROR_INVALID_ENVIRONMENT"));
  dealloc(env, name);
  EXPECT((*env)->GetErrorName(env, (vmtiError)9999, &name), VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT((*env)->GetErrorName(env, (vmtiError)-1, &name), VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT((*env)->GetErrorName(env, (vmtiError)1, &name), VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT((*env)->GetErrorName(env, VMTI_ERROR_NONE, NULL), VMTI_ERROR_NULL_POINTER);

  EXPECT((*env)->Allocate(env, -1, &mem), VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT((*env)->Allocate(env, 8, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT_OK((*env)->Allocate(env, 0, &mem));
  EXPECT_OK((*env)->Deallocate(env, mem));
  EXPECT_OK((*env)->Allocate(env, 100, &mem));
  TRUE(mem != NULL);
  if (mem) memset(mem, 0, 100);
  EXPECT_OK((*env)->Deallocate(env, mem));
  EXPECT_OK((*env)->Deallocate(env, NULL));

  EXPECT((*env)->GetEnvironmentLocalStorage(env, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT_OK((*env)->GetEnvironmentLocalStorage(env, &ls));
  TRUE(ls == NULL);
  EXPECT_OK((*env)->SetEnvironmentLocalStorage(env, &g_checks));
  EXPECT_OK((*env)->GetEnvironmentLocalStorage(env, &ls));
  TRUE(ls == (void*)&g_checks);

  EXPECT((*env)->GetPotentialCapabilities(env, NULL), VMTI_ERROR_NULL_POINTER);
  memset(&pot, 0, sizeof pot);
  EXPECT_OK((*env)->GetPotentialCapabilities(env, &pot));
  TRUE(pot.can_generate_sampled_alloc_events && pot.can_tag_objects && pot.can_generate_object_free_events &&
       pot.can_generate_object_promote_events && pot.can_generate_garbage_collection_events);
  EXPECT((*env)->GetCapabilities(env, NULL), VMTI_ERROR_NULL_POINTER);
  memset(&caps, 0xff, sizeof caps);
  EXPECT_OK((*env)->GetCapabilities(env, &caps));
  TRUE(!caps.can_generate_sampled_alloc_events && !caps.can_tag_objects && !caps.can_generate_object_free_events &&
       !caps.can_generate_object_promote_events && !caps.can_generate_garbage_collection_events);
  EXPECT((*env)->AddCapabilities(env, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT((*env)->RelinquishCapabilities(env, NULL), VMTI_ERROR_NULL_POINTER);

  /* no capability yet */
  EXPECT((*env)->SetHeapSamplingInterval(env, 1024), VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL),
         VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_OBJECT_FREE, NULL),
         VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_OBJECT_PROMOTE, NULL),
         VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_GARBAGE_COLLECTION_START, NULL),
         VMTI_ERROR_MUST_POSSESS_CAPABILITY);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_GARBAGE_COLLECTION_FINISH, NULL),
         VMTI_ERROR_MUST_POSSESS_CAPABILITY);

  /* bad events and modes */
  EXPECT((*env)->SetEventNotificationMode(env, (vmtiEventMode)2, VMTI_EVENT_VM_INIT, NULL),
         VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT((*env)->SetEventNotificationMode(env, (vmtiEventMode)-1, VMTI_EVENT_VM_INIT, NULL),
         VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, (vmtiEvent)49, NULL), VMTI_ERROR_INVALID_EVENT_TYPE);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, (vmtiEvent)88, NULL), VMTI_ERROR_INVALID_EVENT_TYPE);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, (vmtiEvent)54, NULL), VMTI_ERROR_INVALID_EVENT_TYPE);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_ENABLE, (vmtiEvent)84, NULL), VMTI_ERROR_INVALID_EVENT_TYPE);
  EXPECT((*env)->SetEventNotificationMode(env, VMTI_DISABLE, (vmtiEvent)0, NULL), VMTI_ERROR_INVALID_EVENT_TYPE);

  /* LIVE-only functions in ONLOAD */
  {
    vmtiThread th = NULL;
    vmtiInt n = 0;
    vmtiThread* ts = NULL;
    vmtiFrameInfo frames[4];
    vmtiThreadInfo ti;
    vmtiLong t = 0;
    EXPECT((*env)->GetCurrentThread(env, &th), VMTI_ERROR_WRONG_PHASE);
    EXPECT((*env)->GetAllThreads(env, &n, &ts), VMTI_ERROR_WRONG_PHASE);
    EXPECT((*env)->GetStackTrace(env, NULL, 0, 4, frames, &n), VMTI_ERROR_WRONG_PHASE);
    EXPECT((*env)->GetThreadInfo(env, NULL, &ti), VMTI_ERROR_WRONG_PHASE);
    EXPECT((*env)->ForceGarbageCollection(env), VMTI_ERROR_WRONG_PHASE);
    EXPECT_OK((*env)->GetTime(env, &t));
  }

  /* capabilities, then the interval */
  memset(&caps, 0, sizeof caps);
  caps.can_generate_sampled_alloc_events = 1;
  caps.can_tag_objects = 1;
  caps.can_generate_object_free_events = 1;
  caps.can_generate_object_promote_events = 1;
  caps.can_generate_garbage_collection_events = 1;
  EXPECT_OK((*env)->AddCapabilities(env, &caps));
  memset(&caps, 0, sizeof caps);
  EXPECT_OK((*env)->GetCapabilities(env, &caps));
  TRUE(caps.can_generate_sampled_alloc_events && caps.can_tag_objects && caps.can_generate_object_free_events &&
       caps.can_generate_object_promote_events && caps.can_generate_garbage_collection_events);
  EXPECT((*env)->GetHeapSamplingInterval(env, NULL), VMTI_ERROR_NULL_POINTER);
  EXPECT_OK((*env)->GetHeapSamplingInterval(env, &v));
  TRUE(v == 524288);
  EXPECT((*env)->SetHeapSamplingInterval(env, -1), VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT((*env)->SetHeapSamplingInterval(env, -1024), VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT((*env)->SetHeapSamplingInterval(env, INT32_MIN), VMTI_ERROR_ILLEGAL_ARGUMENT);
  EXPECT_OK((*env)->GetHeapSamplingInterval(env, &v));
  TRUE(v == 524288);
  EXPECT_OK((*env)->SetHeapSamplingInterval(env, 1024));
  EXPECT_OK((*env)->GetHeapSamplingInterval(env, &v));
  TRUE(v == 1024);
  EXPECT_OK((*env)->SetHeapSamplingInterval(env, 0));
  EXPECT_OK((*env)->GetHeapSamplingInterval(env, &v));
  TRUE(v == 0);

  /* callbacks: bad size, NULL, a short struct, then the full one */
  {
    vmtiEventCallbacks cb;
    memset(&cb, 0, sizeof cb);
    EXPECT((*env)->SetEventCallbacks(env, &cb, -1), VMTI_ERROR_ILLEGAL_ARGUMENT);
    EXPECT_OK((*env)->SetEventCallbacks(env, NULL, 0));
    cb.VMInit = on_init;
    EXPECT_OK((*env)->SetEventCallbacks(env, &cb, (vmtiInt)(2 * sizeof(void*))));
  }

  /* a second environment: independent capabilities, storage and tags */
  EXPECT_OK((*vm)->GetEnv(vm, (void**)&g_env2, VMTI_VERSION_1));
  if (g_env2) {
    vmtiEnv* e2 = g_env2;
    TRUE(e2 != env);
    ls = (void*)g_garbage;
    EXPECT_OK((*e2)->GetEnvironmentLocalStorage(e2, &ls));
    TRUE(ls == NULL);
    memset(&caps, 0xff, sizeof caps);
    EXPECT_OK((*e2)->GetCapabilities(e2, &caps));
    TRUE(!caps.can_generate_sampled_alloc_events && !caps.can_tag_objects);
    memset(&caps, 0, sizeof caps);
    caps.can_generate_sampled_alloc_events = 1;
    EXPECT_OK((*e2)->AddCapabilities(e2, &caps)); /* several envs may sample */
    EXPECT_OK((*e2)->SetHeapSamplingInterval(e2, 0));
    EXPECT_OK((*e2)->RelinquishCapabilities(e2, &caps));
    memset(&caps, 0xff, sizeof caps);
    EXPECT_OK((*e2)->GetCapabilities(e2, &caps));
    TRUE(!caps.can_generate_sampled_alloc_events);
    EXPECT((*e2)->SetHeapSamplingInterval(e2, 1024), VMTI_ERROR_MUST_POSSESS_CAPABILITY);
    EXPECT((*e2)->SetEventNotificationMode(e2, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL),
           VMTI_ERROR_MUST_POSSESS_CAPABILITY);
    EXPECT_OK((*env)->GetHeapSamplingInterval(env, &v));
    TRUE(v == 0);
  }

  /* disposed environments */
  {
    vmtiEnv* e3 = NULL;
    EXPECT_OK((*vm)->GetEnv(vm, (void**)&e3, VMTI_VERSION_1));
    if (e3) {
      EXPECT_OK((*e3)->DisposeEnvironment(e3));
      EXPECT((*e3)->GetPhase(e3, &ph), VMTI_ERROR_INVALID_ENVIRONMENT);
      EXPECT((*e3)->SetEventNotificationMode(e3, VMTI_ENABLE, VMTI_EVENT_VM_DEATH, NULL),
             VMTI_ERROR_INVALID_ENVIRONMENT);
      EXPECT((*e3)->AddCapabilities(e3, &none), VMTI_ERROR_INVALID_ENVIRONMENT);
      EXPECT((*e3)->DisposeEnvironment(e3), VMTI_ERROR_INVALID_ENVIRONMENT);
    }
    vmtiEnv* e4 = NULL;
    EXPECT_OK((*vm)->GetEnv(vm, (void**)&e4, VMTI_VERSION_1));
    if (e4) {
      vmtiEventCallbacks cb;
      memset(&cb, 0, sizeof cb);
      cb.SampledObjectAlloc = on_sample_disposed;
      memset(&caps, 0, sizeof caps);
      caps.can_generate_sampled_alloc_events = 1;
      EXPECT_OK((*e4)->AddCapabilities(e4, &caps));
      EXPECT_OK((*e4)->SetEventCallbacks(e4, &cb, (vmtiInt)sizeof cb));
      EXPECT_OK((*e4)->SetEventNotificationMode(e4, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL));
      EXPECT_OK((*e4)->DisposeEnvironment(e4));
      EXPECT((*e4)->GetTime(e4, NULL), VMTI_ERROR_INVALID_ENVIRONMENT);
    }
  }
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)options;
  (void)reserved;
  memset(g_garbage, 0xa5, sizeof g_garbage);
  vmtiEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, VMTI_VERSION_1) != VMTI_ERROR_NONE || !env) return 1;
  g_env = env;
  g_stage_ran[ST_ONLOAD] = 1;
  onload_checks(vm, env);

  vmtiEventCallbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.VMInit = on_init;
  cb.VMDeath = on_death;
  cb.ThreadStart = on_thread_start;
  cb.SampledObjectAlloc = on_sample;
  cb.GarbageCollectionStart = on_gc_start;
  cb.GarbageCollectionFinish = on_gc_finish;
  EXPECT_OK((*env)->SetEventCallbacks(env, &cb, (vmtiInt)sizeof cb));
  EXPECT_OK((*env)->SetHeapSamplingInterval(env, 0));
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_INIT, VMTI_EVENT_VM_DEATH,
                                      VMTI_EVENT_THREAD_START, VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                      VMTI_EVENT_GARBAGE_COLLECTION_START,
                                      VMTI_EVENT_GARBAGE_COLLECTION_FINISH};
  for (size_t i = 0; i < sizeof kEvents / sizeof kEvents[0]; i++)
    EXPECT_OK((*env)->SetEventNotificationMode(env, VMTI_ENABLE, kEvents[i], NULL));
  return 0;
}
