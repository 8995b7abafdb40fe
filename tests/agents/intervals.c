/*
 * intervals: an interval per environment (docs/agent-api.md, "An interval
 * per environment"). Load it once per environment, each with its own
 * interval:
 *     // agent: intervals=name=A,interval=4096,switch=65536,marker=Marker
 *     // agent: intervals=name=B,interval=524288
 * Each env sums, per class, the Horvitz-Thompson weights GetSampleInfo
 * gives it, and checks every sample's info against its own interval: the
 * interval it set (or, after `switch`, the new one), and the weight
 * size / (1 - exp(-size / interval)) at that interval. With `switch=N`, the
 * first sample of class `marker` makes the env call SetHeapSamplingInterval
 * (N) from inside the callback: the classes the program allocates after the
 * marker are sampled at N. At VMDeath each env compares its estimate of
 * each class in `classes=NAME:COUNT+NAME:COUNT` (the objects the program
 * allocated) with the truth, COUNT times the size:
 *  - interval 0: exact (every object sampled once, sample_count 1);
 *  - otherwise within 5.7 standard deviations of the estimator, whose
 *    variance is COUNT * size^2 * (1 - P) / P with P = 1 - exp(-size / I),
 *    I the interval the class was sampled at.
 * Output: `PASS intervals NAME` per env, or `FAIL intervals NAME: ...`
 * lines (with each z). The seed is the VM's (--seed in the test). With
 * INTERVALS_DEBUG set in the environment, each class's samples, estimate,
 * truth and z go to stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_ENVS 4
#define MAX_CLASSES 8

typedef struct {
  char name[32];
  long long expected_count; /* from classes= */
  long long samples;        /* callbacks */
  long long points;         /* sum of sample_count */
  long long size;           /* the objects' size, from the samples */
  vmtiInt interval;         /* the interval its samples came at; -1: none yet */
  double estimate;          /* sum of weights */
} ClassTally;

typedef struct {
  char name[32];
  vmtiInt interval; /* current */
  vmtiInt switch_to;
  char marker[32];
  int switched;
  char classes[256];
  ClassTally tallies[MAX_CLASSES];
  int ntallies;
  char fail[8][160];
  int failures;
} Instance;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Instance g_instances[MAX_ENVS];
static int g_ninstances;

static void fail(Instance* in, const char* fmt, const char* a, double x, double y) {
  char line[sizeof in->fail[0]];
  snprintf(line, sizeof line, fmt, a, x, y);
  if (in->failures < 8) memcpy(in->fail[in->failures], line, sizeof line);
  in->failures++;
}

static ClassTally* tally_of(Instance* in, const char* cls) {
  for (int i = 0; i < in->ntallies; i++)
    if (!strcmp(in->tallies[i].name, cls)) return &in->tallies[i];
  if (in->ntallies == MAX_CLASSES) return NULL;
  ClassTally* t = &in->tallies[in->ntallies++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%.31s", cls);
  t->expected_count = -1;
  t->interval = -1;
  return t;
}

static double weight_at(long long size, vmtiInt interval) {
  if (interval == 0) return (double)size;
  return (double)size / -expm1(-(double)size / interval);
}

static void on_sample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                              vmtiLong size) {
  (void)thread;
  (void)object;
  Instance* in = NULL;
  if ((*env)->GetEnvironmentLocalStorage(env, (void**)&in) != VMTI_ERROR_NONE || !in) return;
  char* sig = NULL;
  if ((*env)->GetClassSignature(env, klass, &sig, NULL) != VMTI_ERROR_NONE || !sig) return;
  vmtiSampleInfo info;
  vmtiError err = (*env)->GetSampleInfo(env, &info);
  pthread_mutex_lock(&g_lock);
  ClassTally* t = tally_of(in, sig);
  if (err != VMTI_ERROR_NONE) {
    fail(in, "GetSampleInfo failed for %s (%g %g)", sig, err, 0);
  } else if (t) {
    if (info.interval != in->interval) fail(in, "%s sampled at interval %g, not %g", sig, info.interval, in->interval);
    if (info.sample_count < 1 || (in->interval == 0 && info.sample_count != 1))
      fail(in, "%s: sample_count %g at interval %g", sig, (double)info.sample_count, in->interval);
    if (fabs(info.weight - weight_at(size, info.interval)) > 1e-9 * info.weight)
      fail(in, "%s: weight %g, want %g", sig, info.weight, weight_at(size, info.interval));
    if (t->interval >= 0 && t->interval != info.interval)
      fail(in, "%s sampled at two intervals, %g and %g", sig, t->interval, info.interval);
    t->interval = info.interval;
    t->samples++;
    t->points += info.sample_count;
    t->size = size;
    t->estimate += info.weight;
  }
  int do_switch = in->switch_to >= 0 && !in->switched && !strcmp(sig, in->marker);
  if (do_switch) in->switched = 1;
  pthread_mutex_unlock(&g_lock);
  (*env)->Deallocate(env, (unsigned char*)sig);
  if (do_switch) {
    if ((*env)->SetHeapSamplingInterval(env, in->switch_to) != VMTI_ERROR_NONE) {
      pthread_mutex_lock(&g_lock);
      fail(in, "SetHeapSamplingInterval(%s%g) failed (%g)", "", in->switch_to, 0);
      pthread_mutex_unlock(&g_lock);
      return;
    }
    vmtiInt now = -1;
    (*env)->GetHeapSamplingInterval(env, &now);
    pthread_mutex_lock(&g_lock);
    if (now != in->switch_to) fail(in, "%sGetHeapSamplingInterval says %g, not %g", "", now, in->switch_to);
    in->interval = in->switch_to;
    pthread_mutex_unlock(&g_lock);
  }
}

/* classes=NAME:COUNT+NAME:COUNT into the tallies' expected counts. */
static int parse_classes(Instance* in) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", in->classes);
  for (char *save = NULL, *item = strtok_r(buf, "+", &save); item; item = strtok_r(NULL, "+", &save)) {
    char* colon = strchr(item, ':');
    if (!colon) return 0;
    *colon = '\0';
    ClassTally* t = tally_of(in, item);
    if (!t) return 0;
    t->expected_count = atoll(colon + 1);
  }
  return 1;
}

static void on_death(vmtiEnv* env) {
  Instance* in = NULL;
  if ((*env)->GetEnvironmentLocalStorage(env, (void**)&in) != VMTI_ERROR_NONE || !in) return;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < in->ntallies; i++) {
    const ClassTally* t = &in->tallies[i];
    if (t->expected_count < 0) continue; /* not checked: allocated by the VM or the test */
    if (t->samples == 0) {
      fail(in, "%s: no sample (%g %g)", t->name, 0, 0);
      continue;
    }
    const double truth = (double)t->expected_count * (double)t->size;
    if (t->interval == 0) {
      if (t->samples != t->expected_count || t->estimate != truth)
        fail(in, "%s at interval 0: %g samples, want %g", t->name, (double)t->samples,
             (double)t->expected_count);
      continue;
    }
    const double p = -expm1(-(double)t->size / t->interval);
    const double sd = sqrt((double)t->expected_count * (double)t->size * (double)t->size * (1 - p) / p);
    const double z = (t->estimate - truth) / sd;
    if (getenv("INTERVALS_DEBUG")) fprintf(stderr, "%s %s: %lld samples at %d, size %lld, estimate %g truth %g z %g\n", in->name, t->name, t->samples, t->interval, t->size, t->estimate, truth, z);
    if (fabs(z) > 5.7) fail(in, "%s: estimate off by z = %g (estimate %g)", t->name, z, t->estimate);
  }
  if (in->failures == 0) {
    printf("PASS intervals %s\n", in->name);
  } else {
    for (int i = 0; i < in->failures && i < 8; i++) printf("FAIL intervals %s: %s\n", in->name, in->fail[i]);
  }
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  pthread_mutex_lock(&g_lock);
  if (g_ninstances >= MAX_ENVS) {
    pthread_mutex_unlock(&g_lock);
    return 1;
  }
  Instance* in = &g_instances[g_ninstances++];
  pthread_mutex_unlock(&g_lock);
  memset(in, 0, sizeof *in);
  in->interval = 524288;
  in->switch_to = -1;
  const TestAgentOption options_table[] = {TA_STRING_OPTION("name", in->name),
                                            TA_OPTION("interval", TA_OPTION_INT, &in->interval),
                                            TA_OPTION("switch", TA_OPTION_INT, &in->switch_to),
                                            TA_STRING_OPTION("marker", in->marker),
                                            TA_STRING_OPTION("classes", in->classes), TA_OPTIONS_END};
  if (TestAgentParseOptions("intervals", options, options_table)) return 1;
  if (!parse_classes(in)) {
    fprintf(stderr, "intervals: bad option classes=%s\n", in->classes);
    return 1;
  }
  vmtiEnv* env = TestAgentEnv(vm);
  if (!env || (*env)->SetEnvironmentLocalStorage(env, in) != VMTI_ERROR_NONE) return 1;
  static const vmtiEvent kEvents[] = {VMTI_EVENT_VM_DEATH, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.SampledObjectAlloc = on_sample, .VMDeath = on_death},
                      .set_interval = TA_SET_INTERVAL,
                      .interval = in->interval,
                      .events = kEvents};
  return TestAgentSetUp(env, &s) == VMTI_ERROR_NONE ? 0 : 1;
}
