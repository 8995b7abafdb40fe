/*
 * firstalloc: a thread's first allocation is not special (JDK-8247615,
 * HeapMonitorInitialAllocationTest).
 *
 * The program starts `n` threads that each allocate one object of class
 * Node (`size` bytes) and exit. At interval I each such object is sampled
 * with p = 1 - exp(-size/I), independently, so the number of Node samples
 * is Binomial(n, p). The agent computes the smallest k with
 * P(X >= k) <= 1e-9 and fails when k or more Node samples arrive. (HotSpot
 * allows up to half of 500; a sampler that samples every thread's first
 * allocation gives n.)
 *
 * Options: n=N, size=S, interval=I (default 1 MiB), seed=S (printed).
 * At VMDeath: `PASS firstalloc` or `FAIL firstalloc: ...`.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

static long long g_n = 200, g_size = 24, g_seed = -1;
static vmtiInt g_interval = 1 << 20;
static long long g_samples;  /* atomic */
static long long g_bad_size; /* atomic */

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                      vmtiLong size) {
  (void)thread;
  (void)object;
  char* sig = NULL;
  if ((*env)->GetClassSignature(env, klass, &sig, NULL) != VMTI_ERROR_NONE || !sig) return;
  if (!strcmp(sig, "Node")) {
    __atomic_add_fetch(&g_samples, 1, __ATOMIC_RELAXED);
    if (size != g_size) __atomic_add_fetch(&g_bad_size, 1, __ATOMIC_RELAXED);
  }
  (*env)->Deallocate(env, (unsigned char*)sig);
}

/* smallest k with P(Binomial(n, p) >= k) <= bound */
static long long tail_bound(long long n, double p, double bound) {
  double tail = 1.0; /* P(X >= 0) */
  for (long long k = 0; k <= n; k++) {
    if (tail <= bound) return k;
    double lp = lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1) +
                (double)k * log(p) + (double)(n - k) * log1p(-p);
    tail -= exp(lp); /* now P(X >= k+1) */
  }
  return n + 1;
}

static void on_death(vmtiEnv* env) {
  (void)env;
  double p = -expm1(-(double)g_size / (double)g_interval);
  long long k = tail_bound(g_n, p, 1e-9);
  long long s = __atomic_load_n(&g_samples, __ATOMIC_RELAXED);
  fprintf(stderr, "firstalloc: %lld Node samples of %lld, expected %.4f, bound %lld\n", s, g_n, g_n * p, k);
  if (__atomic_load_n(&g_bad_size, __ATOMIC_RELAXED))
    printf("FAIL firstalloc: Node samples with size != %lld\n", g_size);
  else if (s >= k)
    printf("FAIL firstalloc: %lld Node samples of %lld first allocations, expected %.4f, P(>= %lld) <= 1e-9 seed=%lld\n",
           s, g_n, g_n * p, k, g_seed);
  else
    printf("PASS firstalloc\n");
  fflush(stdout);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  static const TestAgentOption kOptions[] = {
      TA_OPTION("n", TA_OPTION_LONG, &g_n), TA_OPTION("size", TA_OPTION_LONG, &g_size),
      TA_OPTION("interval", TA_OPTION_INT, &g_interval), TA_OPTION("seed", TA_OPTION_LONG, &g_seed),
      TA_OPTIONS_END};
  if (TestAgentParseOptions("firstalloc", options, kOptions)) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death},
                      .set_interval = TA_SET_INTERVAL, .interval = g_interval, .events = kEvents};
  return TestAgentStart(vm, &s) ? 0 : 1;
}
