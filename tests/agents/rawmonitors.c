/*
 * rawmonitors: RunAgentThread and raw monitors (the second edition's
 * "Agent threads and raw monitors"), their errors, and environment-local
 * storage from every kind of thread.
 *
 * Agent_OnLoad (ONLOAD): monitors are created, entered reentrantly, waited
 * on with a timeout; every misuse gives its error (NULL pointers, a forged
 * and a NULL handle, a destroyed monitor, exit/wait/notify without owning);
 * RunAgentThread is WRONG_PHASE; GetErrorName names every error code.
 * VMInit (main): RunAgentThread's NULL checks; then two agent threads and
 * one plain pthread. main waits (in RawMonitorWait, so safepoint-safe) while
 * the agent thread `worker-agent` forces a collection, and takes part in:
 * destroy/exit/notify of a monitor another thread holds (NOT_MONITOR_OWNER),
 * a Wait that releases three recursion levels and restores them, Notify
 * waking exactly one of two waiters (an agent thread and a pthread) and
 * NotifyAll the other. The agent thread's identity (name, negative id, no
 * parent, no frames, in GetAllThreads but not in GetAllStackTraces) and its
 * ThreadStart/ThreadEnd are checked. GarbageCollectionStart/Finish use raw
 * monitors (allowed) and GetCurrentThread (WRONG_PHASE).
 * VMDeath: the agent thread `waiter-agent`, waiting forever, gets
 * VMTI_ERROR_INTERRUPT (and again at once on a second wait, still owning the
 * monitor); after VMDeath (phase DEAD) its LIVE call gives WRONG_PHASE,
 * which Agent_OnUnload waits for on a raw monitor (they work when DEAD) and
 * prints with the verdict. An agent thread started by VMDeath is blocked in
 * RawMonitorEnter (VMDeath holds the monitor for good) when the process
 * ends: the exit is normal.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_agent.h"

static vmtiEnv* g_env;
static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_failures;
static char g_fail[16][256];
static int g_storage_marker;

static void fail(const char* what, long long got, long long want) {
  pthread_mutex_lock(&g_fail_lock);
  if (g_failures < 16) {
    snprintf(g_fail[g_failures], sizeof g_fail[0], "%s: got %lld, want %lld", what, got, want);
  }
  g_failures++;
  pthread_mutex_unlock(&g_fail_lock);
}

#define CHECK_ERR(call, want)                                  \
  do {                                                         \
    vmtiError e_ = (call);                                     \
    if (e_ != (want)) fail(#call, (long long)e_, (long long)(want)); \
  } while (0)
#define CHECK(cond) \
  do {              \
    if (!(cond)) fail(#cond, 0, 1); \
  } while (0)

/* Monitors. g_sync carries every handshake below (counters it guards). */
static vmtiRawMonitorID g_sync, g_reentrant, g_held, g_notify, g_gc, g_interrupt, g_doomed;
static vmtiRawMonitorID g_forever; /* entered by VMDeath, never exited */
static int g_step;            /* the held-monitor and reentrancy handshakes */
static int g_waiting;         /* threads inside RawMonitorWait(g_notify) */
static int g_woken;           /* ... and out of it */
static int g_reentrant_go;    /* main has entered g_reentrant while the worker waits */
static int g_worker_ended;    /* ThreadEnd of worker-agent */
static int g_agent_starts;    /* ThreadStart of the two agent threads */
static int g_interrupted;     /* waiter-agent got INTERRUPT */
static int g_dead_result = -1; /* waiter-agent's call after VMDeath */
static int g_doomed_waiting;  /* the pthread waits on g_doomed */
static int g_blocker_started; /* blocker-agent runs (started in VMDeath) */
static vmtiThread g_worker_handle; /* from ThreadStart, on the worker itself */

/* GC callbacks: atomics only. */
static int g_gc_events, g_gc_bad;

static void sync_enter(void) { CHECK_ERR((*g_env)->RawMonitorEnter(g_env, g_sync), VMTI_ERROR_NONE); }
static void sync_exit(void) { CHECK_ERR((*g_env)->RawMonitorExit(g_env, g_sync), VMTI_ERROR_NONE); }
static void sync_wait(void) { CHECK_ERR((*g_env)->RawMonitorWait(g_env, g_sync, 0), VMTI_ERROR_NONE); }
static void sync_notify(void) {
  CHECK_ERR((*g_env)->RawMonitorNotifyAll(g_env, g_sync), VMTI_ERROR_NONE);
}
static void sync_set(int* var, int value) {
  sync_enter();
  *var = value;
  sync_notify();
  sync_exit();
}
static void sync_add(int* var) {
  sync_enter();
  ++*var;
  sync_notify();
  sync_exit();
}
static void sync_await(const int* var, int at_least) {
  sync_enter();
  while (*var < at_least) sync_wait();
  sync_exit();
}

static void check_storage(vmtiEnv* env) {
  void* data = NULL;
  CHECK_ERR((*env)->GetEnvironmentLocalStorage(env, &data), VMTI_ERROR_NONE);
  CHECK(data == &g_storage_marker);
  CHECK_ERR((*env)->GetEnvironmentLocalStorage(env, NULL), VMTI_ERROR_NULL_POINTER);
  CHECK_ERR((*env)->SetEnvironmentLocalStorage(env, &g_storage_marker), VMTI_ERROR_NONE);
}

/* Notify wakes one waiter: both waiters run this. */
static void notify_waiter(vmtiEnv* env) {
  CHECK_ERR((*env)->RawMonitorEnter(env, g_notify), VMTI_ERROR_NONE);
  sync_add(&g_waiting);
  /* One Wait, no loop: a raw monitor wait returns only when notified. */
  CHECK_ERR((*env)->RawMonitorWait(env, g_notify, 0), VMTI_ERROR_NONE);
  sync_add(&g_woken);
  CHECK_ERR((*env)->RawMonitorExit(env, g_notify), VMTI_ERROR_NONE);
}

static void* native_thread(void* arg) {
  (void)arg;
  check_storage(g_env);
  vmtiThread self = NULL;
  CHECK_ERR((*g_env)->GetCurrentThread(g_env, &self), VMTI_ERROR_INVALID_THREAD);
  notify_waiter(g_env);
  /* A monitor destroyed while this thread waits on it: the wait ends with
   * INVALID_MONITOR (it cannot be owned again), never a crash or a hang. */
  CHECK_ERR((*g_env)->RawMonitorEnter(g_env, g_doomed), VMTI_ERROR_NONE);
  sync_set(&g_doomed_waiting, 1);
  CHECK_ERR((*g_env)->RawMonitorWait(g_env, g_doomed, 0), VMTI_ERROR_INVALID_MONITOR);
  CHECK_ERR((*g_env)->RawMonitorExit(g_env, g_doomed), VMTI_ERROR_INVALID_MONITOR);
  return NULL;
}

static int in_list(vmtiThread t, const vmtiThread* list, int n) {
  for (int i = 0; i < n; ++i) {
    if (list[i] == t) return 1;
  }
  return 0;
}

static void worker_proc(vmtiEnv* env, void* arg) {
  CHECK(arg == &g_storage_marker);
  check_storage(env);

  /* Who am I: a VM-known thread with the given name, no parent, no frames. */
  vmtiThread self = NULL;
  CHECK_ERR((*env)->GetCurrentThread(env, &self), VMTI_ERROR_NONE);
  CHECK(self != NULL && self == g_worker_handle);
  vmtiThreadInfo info;
  memset(&info, 0, sizeof info);
  CHECK_ERR((*env)->GetThreadInfo(env, NULL, &info), VMTI_ERROR_NONE);
  CHECK(info.name != NULL && strcmp(info.name, "worker-agent") == 0);
  CHECK(info.id < 0);
  (*env)->Deallocate(env, (unsigned char*)info.name);
  vmtiThread parent = self;
  CHECK_ERR((*env)->GetThreadParent(env, NULL, &parent), VMTI_ERROR_NONE);
  CHECK(parent == NULL);
  vmtiInt frames = -1;
  CHECK_ERR((*env)->GetFrameCount(env, NULL, &frames), VMTI_ERROR_NONE);
  CHECK(frames == 0);
  vmtiFrameInfo frame_buffer[4];
  vmtiInt count = -1;
  CHECK_ERR((*env)->GetStackTrace(env, NULL, 0, 4, frame_buffer, &count), VMTI_ERROR_NONE);
  CHECK(count == 0);
  vmtiInt n = 0;
  vmtiThread* all = NULL;
  CHECK_ERR((*env)->GetAllThreads(env, &n, &all), VMTI_ERROR_NONE);
  CHECK(in_list(self, all, n));
  (*env)->Deallocate(env, (unsigned char*)all);
  vmtiStackInfo* stacks = NULL;
  CHECK_ERR((*env)->GetAllStackTraces(env, 4, &stacks, &n), VMTI_ERROR_NONE);
  for (int i = 0; stacks != NULL && i < n; ++i) CHECK(stacks[i].thread != self);
  (*env)->Deallocate(env, (unsigned char*)stacks);
  CHECK_ERR((*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_THREAD_END, self),
            VMTI_ERROR_NONE);
  vmtiBool cleared = 0;
  CHECK_ERR((*env)->IsWeakRefCleared(env, (vmtiWeak)(uintptr_t)0x5eed, &cleared),
            VMTI_ERROR_INVALID_OBJECT);

  /* A collection while main waits in RawMonitorWait (inside VMInit). */
  CHECK_ERR((*env)->ForceGarbageCollection(env), VMTI_ERROR_NONE);

  /* Hold g_held while main tries to destroy, exit and notify it. */
  CHECK_ERR((*env)->RawMonitorEnter(env, g_held), VMTI_ERROR_NONE);
  sync_set(&g_step, 1);
  sync_await(&g_step, 2);
  CHECK_ERR((*env)->RawMonitorExit(env, g_held), VMTI_ERROR_NONE);

  /* Wait releases all three levels (main enters meanwhile) and restores them. */
  for (int i = 0; i < 3; ++i) CHECK_ERR((*env)->RawMonitorEnter(env, g_reentrant), VMTI_ERROR_NONE);
  sync_set(&g_step, 3);
  while (!g_reentrant_go) CHECK_ERR((*env)->RawMonitorWait(env, g_reentrant, 0), VMTI_ERROR_NONE);
  for (int i = 0; i < 3; ++i) CHECK_ERR((*env)->RawMonitorExit(env, g_reentrant), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorExit(env, g_reentrant), VMTI_ERROR_NOT_MONITOR_OWNER);

  notify_waiter(env);
}

static void waiter_proc(vmtiEnv* env, void* arg) {
  CHECK(arg == NULL);
  check_storage(env);
  CHECK_ERR((*env)->RawMonitorEnter(env, g_interrupt), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorEnter(env, g_interrupt), VMTI_ERROR_NONE);
  /* Nobody notifies g_interrupt: only VM death ends this wait. */
  vmtiError first = (*env)->RawMonitorWait(env, g_interrupt, 0);
  vmtiError second = (*env)->RawMonitorWait(env, g_interrupt, 0);
  /* Still owned, with both levels. */
  vmtiError exit1 = (*env)->RawMonitorExit(env, g_interrupt);
  vmtiError exit2 = (*env)->RawMonitorExit(env, g_interrupt);
  CHECK_ERR(exit1, VMTI_ERROR_NONE);
  CHECK_ERR(exit2, VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorExit(env, g_interrupt), VMTI_ERROR_NOT_MONITOR_OWNER);
  sync_enter();
  g_interrupted = (first == VMTI_ERROR_INTERRUPT) + (second == VMTI_ERROR_INTERRUPT);
  sync_notify();
  sync_exit();
  /* After VMDeath returns the phase is DEAD: LIVE functions say so. */
  vmtiPhase phase = VMTI_PHASE_LIVE;
  const struct timespec tick = {0, 1000 * 1000};
  while ((*env)->GetPhase(env, &phase) == VMTI_ERROR_NONE && phase != VMTI_PHASE_DEAD) {
    nanosleep(&tick, NULL);
  }
  vmtiThread self = NULL;
  sync_set(&g_dead_result, (int)(*env)->GetCurrentThread(env, &self));
}

static void check_forged(vmtiEnv* env, vmtiRawMonitorID m) {
  CHECK_ERR((*env)->RawMonitorEnter(env, m), VMTI_ERROR_INVALID_MONITOR);
  CHECK_ERR((*env)->RawMonitorExit(env, m), VMTI_ERROR_INVALID_MONITOR);
  CHECK_ERR((*env)->RawMonitorWait(env, m, 1), VMTI_ERROR_INVALID_MONITOR);
  CHECK_ERR((*env)->RawMonitorNotify(env, m), VMTI_ERROR_INVALID_MONITOR);
  CHECK_ERR((*env)->RawMonitorNotifyAll(env, m), VMTI_ERROR_INVALID_MONITOR);
  CHECK_ERR((*env)->DestroyRawMonitor(env, m), VMTI_ERROR_INVALID_MONITOR);
}

static void on_thread_start(vmtiEnv* env, vmtiThread thread) {
  vmtiThreadInfo info;
  memset(&info, 0, sizeof info);
  if ((*env)->GetThreadInfo(env, thread, &info) != VMTI_ERROR_NONE) return;
  if (strcmp(info.name, "worker-agent") == 0) g_worker_handle = thread;  /* its own thread */
  if (strcmp(info.name, "worker-agent") == 0 || strcmp(info.name, "waiter-agent") == 0) {
    sync_add(&g_agent_starts);
  }
  (*env)->Deallocate(env, (unsigned char*)info.name);
}

static void on_thread_end(vmtiEnv* env, vmtiThread thread) {
  vmtiThreadInfo info;
  memset(&info, 0, sizeof info);
  if ((*env)->GetThreadInfo(env, thread, &info) != VMTI_ERROR_NONE) return;
  if (strcmp(info.name, "worker-agent") == 0) sync_set(&g_worker_ended, 1);
  (*env)->Deallocate(env, (unsigned char*)info.name);
}

static void on_gc(vmtiEnv* env) {
  /* Exactly the raw monitor functions work here (JVMTI). */
  if ((*env)->RawMonitorEnter(env, g_gc) != VMTI_ERROR_NONE ||
      (*env)->RawMonitorNotifyAll(env, g_gc) != VMTI_ERROR_NONE ||
      (*env)->RawMonitorExit(env, g_gc) != VMTI_ERROR_NONE) {
    __atomic_add_fetch(&g_gc_bad, 1, __ATOMIC_SEQ_CST);
  }
  vmtiThread t;
  if ((*env)->GetCurrentThread(env, &t) != VMTI_ERROR_WRONG_PHASE) {
    __atomic_add_fetch(&g_gc_bad, 1, __ATOMIC_SEQ_CST);
  }
  __atomic_add_fetch(&g_gc_events, 1, __ATOMIC_SEQ_CST);
}

static void on_vm_init(vmtiEnv* env, vmtiThread main_thread) {
  (void)main_thread;
  check_storage(env);
  CHECK_ERR((*env)->RunAgentThread(env, NULL, worker_proc, NULL, NULL), VMTI_ERROR_NULL_POINTER);
  CHECK_ERR((*env)->RunAgentThread(env, "x", NULL, NULL, NULL), VMTI_ERROR_NULL_POINTER);
  vmtiThread worker = NULL;
  CHECK_ERR((*env)->RunAgentThread(env, "worker-agent", worker_proc, &g_storage_marker, &worker),
            VMTI_ERROR_NONE);
  CHECK(worker != NULL);
  CHECK_ERR((*env)->RunAgentThread(env, "waiter-agent", waiter_proc, NULL, NULL), VMTI_ERROR_NONE);
  pthread_t native;
  CHECK(pthread_create(&native, NULL, native_thread, NULL) == 0);

  /* Another thread's frames: none, and no error. */
  vmtiInt frames = -1;
  CHECK_ERR((*env)->GetFrameCount(env, worker, &frames), VMTI_ERROR_NONE);
  CHECK(frames == 0);
  vmtiStackInfo* stacks = NULL;
  CHECK_ERR((*env)->GetThreadListStackTraces(env, 1, &worker, 4, &stacks), VMTI_ERROR_NONE);
  CHECK(stacks != NULL && stacks[0].thread == worker && stacks[0].frame_count == 0);
  (*env)->Deallocate(env, (unsigned char*)stacks);

  /* g_held is the worker's: main may not destroy, exit or notify it. */
  sync_await(&g_step, 1);
  CHECK_ERR((*env)->DestroyRawMonitor(env, g_held), VMTI_ERROR_NOT_MONITOR_OWNER);
  CHECK_ERR((*env)->RawMonitorExit(env, g_held), VMTI_ERROR_NOT_MONITOR_OWNER);
  CHECK_ERR((*env)->RawMonitorNotify(env, g_held), VMTI_ERROR_NOT_MONITOR_OWNER);
  CHECK_ERR((*env)->RawMonitorWait(env, g_held, 1), VMTI_ERROR_NOT_MONITOR_OWNER);
  sync_set(&g_step, 2);

  /* Entering g_reentrant succeeds only once the worker's Wait released it. */
  sync_await(&g_step, 3);
  CHECK_ERR((*env)->RawMonitorEnter(env, g_reentrant), VMTI_ERROR_NONE);
  g_reentrant_go = 1;
  CHECK_ERR((*env)->RawMonitorNotify(env, g_reentrant), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorExit(env, g_reentrant), VMTI_ERROR_NONE);

  /* Two waiters in g_notify: Notify wakes one, NotifyAll the other. They
   * count themselves while holding g_notify, so once main can enter it both
   * are inside their Wait. */
  sync_await(&g_waiting, 2);
  CHECK_ERR((*env)->RawMonitorEnter(env, g_notify), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorNotify(env, g_notify), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorExit(env, g_notify), VMTI_ERROR_NONE);
  sync_await(&g_woken, 1);
  sync_enter();
  CHECK(g_woken == 1);
  sync_exit();
  CHECK_ERR((*env)->RawMonitorEnter(env, g_notify), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorNotifyAll(env, g_notify), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorExit(env, g_notify), VMTI_ERROR_NONE);
  sync_await(&g_woken, 2);

  /* g_doomed destroyed by its owner while the pthread waits on it. */
  sync_await(&g_doomed_waiting, 1);
  CHECK_ERR((*env)->RawMonitorEnter(env, g_doomed), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->DestroyRawMonitor(env, g_doomed), VMTI_ERROR_NONE);

  /* The worker's ThreadEnd, and the pthread. */
  sync_await(&g_worker_ended, 1);
  sync_await(&g_agent_starts, 2);
  CHECK(pthread_join(native, NULL) == 0);
  CHECK_ERR((*env)->DestroyRawMonitor(env, g_held), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorEnter(env, g_held), VMTI_ERROR_INVALID_MONITOR);
}

/* Started by VMDeath: blocks in RawMonitorEnter until the process ends,
 * which must end normally all the same. */
static void blocker_proc(vmtiEnv* env, void* arg) {
  (void)arg;
  sync_set(&g_blocker_started, 1);
  (*env)->RawMonitorEnter(env, g_forever);
  fail("blocker-agent entered a monitor VMDeath holds", 0, 0);
}

static void on_vm_death(vmtiEnv* env) {
  check_storage(env);
  CHECK_ERR((*env)->RawMonitorEnter(env, g_forever), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RunAgentThread(env, "blocker-agent", blocker_proc, NULL, NULL),
            VMTI_ERROR_NONE);
  sync_await(&g_blocker_started, 1);
  /* VM death interrupts waiter-agent's wait; VMDeath did not wait for it. */
  sync_await(&g_interrupted, 1);
}

/* The verdict, in phase DEAD. */
VMTI_EXPORT void Agent_OnUnload(vmtiVM* vm) {
  (void)vm;
  vmtiEnv* env = g_env;
  CHECK_ERR((*env)->RunAgentThread(env, "dead", waiter_proc, NULL, NULL), VMTI_ERROR_WRONG_PHASE);
  CHECK_ERR((*env)->CreateRawMonitor(env, "dead", &g_gc), VMTI_ERROR_WRONG_PHASE);
  sync_enter();
  while (g_dead_result < 0 || g_interrupted < 2) sync_wait();
  sync_exit();
  printf("agent threads started %d, worker ended %d\n", g_agent_starts, g_worker_ended);
  printf("waiter-agent: interrupted %d, after VMDeath %d\n", g_interrupted, g_dead_result);
  printf("gc callbacks %s, bad %d\n", g_gc_events > 0 ? ">0" : "0", g_gc_bad);
  for (int i = 0; i < g_failures && i < 16; ++i) printf("FAIL rawmonitors: %s\n", g_fail[i]);
  if (g_failures == 0) printf("PASS rawmonitors\n");
  fflush(stdout);
}

/* Every code in the header's table has its name; anything else is
 * ILLEGAL_ARGUMENT with a NULL name. */
static void check_error_names(vmtiEnv* env) {
  static const struct {
    vmtiError code;
    const char* name;
  } known[] = {
#define NAME_(name, value) {VMTI_ERROR_##name, "VMTI_ERROR_" #name},
      VMTI_ERRORS(NAME_)
#undef NAME_
  };
  const int n = (int)(sizeof known / sizeof known[0]);
  int named = 0;
  for (int code = -2; code <= 300; ++code) {
    char* name = (char*)1;
    vmtiError err = (*env)->GetErrorName(env, (vmtiError)code, &name);
    int index = -1;
    for (int i = 0; i < n; ++i) {
      if ((int)known[i].code == code) index = i;
    }
    if (index < 0) {
      CHECK(err == VMTI_ERROR_ILLEGAL_ARGUMENT && name == NULL);
      continue;
    }
    CHECK(err == VMTI_ERROR_NONE && name != NULL && strcmp(name, known[index].name) == 0);
    if (err == VMTI_ERROR_NONE) (*env)->Deallocate(env, (unsigned char*)name);
    named++;
  }
  /* The three raw monitor errors are JVMTI's numbers. */
  CHECK(VMTI_ERROR_INVALID_MONITOR == 50 && VMTI_ERROR_NOT_MONITOR_OWNER == 51 &&
        VMTI_ERROR_INTERRUPT == 52);
  CHECK(named == n);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)options;
  (void)reserved;
  if ((*vm)->GetEnv(vm, (void**)&g_env, VMTI_VERSION_1) != VMTI_ERROR_NONE) return 1;
  vmtiEnv* env = g_env;
  CHECK_ERR((*env)->SetEnvironmentLocalStorage(env, &g_storage_marker), VMTI_ERROR_NONE);

  vmtiRawMonitorID m = NULL;
  CHECK_ERR((*env)->CreateRawMonitor(env, NULL, &m), VMTI_ERROR_NULL_POINTER);
  CHECK_ERR((*env)->CreateRawMonitor(env, "x", NULL), VMTI_ERROR_NULL_POINTER);
  vmtiRawMonitorID* all[] = {&g_sync, &g_reentrant, &g_held, &g_notify, &g_gc, &g_interrupt, &g_doomed, &g_forever};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    if ((*env)->CreateRawMonitor(env, "m", all[i]) != VMTI_ERROR_NONE) return 1;
  }
  CHECK(g_sync != g_reentrant);

  /* Reentrant, in ONLOAD; a non-owner's exit, wait and notify. */
  CHECK_ERR((*env)->RawMonitorExit(env, g_reentrant), VMTI_ERROR_NOT_MONITOR_OWNER);
  CHECK_ERR((*env)->RawMonitorWait(env, g_reentrant, 1), VMTI_ERROR_NOT_MONITOR_OWNER);
  CHECK_ERR((*env)->RawMonitorNotify(env, g_reentrant), VMTI_ERROR_NOT_MONITOR_OWNER);
  CHECK_ERR((*env)->RawMonitorNotifyAll(env, g_reentrant), VMTI_ERROR_NOT_MONITOR_OWNER);
  CHECK_ERR((*env)->RawMonitorEnter(env, g_reentrant), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorEnter(env, g_reentrant), VMTI_ERROR_NONE);
  /* A timed wait with nobody to notify: returns after its timeout, owned. */
  CHECK_ERR((*env)->RawMonitorWait(env, g_reentrant, 1), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorNotify(env, g_reentrant), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorExit(env, g_reentrant), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorExit(env, g_reentrant), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorExit(env, g_reentrant), VMTI_ERROR_NOT_MONITOR_OWNER);

  /* Forged, NULL and destroyed handles; destroying one the caller holds. */
  check_forged(env, (vmtiRawMonitorID)(uintptr_t)0xdeadbeef);
  check_forged(env, NULL);
  check_forged(env, (vmtiRawMonitorID)&g_sync);
  CHECK_ERR((*env)->CreateRawMonitor(env, "doomed", &m), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorEnter(env, m), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->RawMonitorEnter(env, m), VMTI_ERROR_NONE);
  CHECK_ERR((*env)->DestroyRawMonitor(env, m), VMTI_ERROR_NONE);
  check_forged(env, m);

  CHECK_ERR((*env)->RunAgentThread(env, "early", worker_proc, NULL, NULL), VMTI_ERROR_WRONG_PHASE);
  check_error_names(env);

  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_INIT, VMTI_EVENT_VM_DEATH,
                                      VMTI_EVENT_THREAD_START, VMTI_EVENT_GARBAGE_COLLECTION_START,
                                      VMTI_EVENT_GARBAGE_COLLECTION_FINISH, 0};
  TestAgentSetup s = {.capabilities = TA_GC_EVENTS,
                      .callbacks = {.VMInit = on_vm_init, .VMDeath = on_vm_death,
                                    .ThreadStart = on_thread_start, .ThreadEnd = on_thread_end,
                                    .GarbageCollectionStart = on_gc,
                                    .GarbageCollectionFinish = on_gc},
                      .events = kEvents};
  return TestAgentSetUp(env, &s) == VMTI_ERROR_NONE ? 0 : 1;
}
