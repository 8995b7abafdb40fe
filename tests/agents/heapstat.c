/*
 * heapstat: the statistical acceptance agent (samplers.md section 9).
 *
 * The test program allocates a known list of objects; the .mv file tells the
 * agent that list through its options, and the agent checks what it sampled
 * against the distribution the contract implies. Sample points form a Poisson
 * process of mean gap I over each thread's allocated bytes, so for N objects
 * of size s at interval I:
 *   - sampled objects      ~ Binomial(N, p),  p = 1 - exp(-s/I)
 *   - sum of sample_count  ~ Poisson(N s / I)
 *   - sum of HT weights    has mean N s and variance N s^2 (1-p)/p
 *   - sample_count of one object ~ Poisson(s/I) (0 = not sampled)
 * Counts are tested with exact two-sided binomial / Poisson tails at
 * alpha = 1.2e-8 (the two-sided 5.7 sigma level); sums of weights with a
 * z-score (|z| <= 5.7); histograms with chi-square at p >= 1e-8.
 *
 * Options (comma separated):
 *   name=NAME        the verdict line is `PASS NAME` (default heapstat)
 *   interval=I       SetHeapSamplingInterval(I) in Agent_OnLoad
 *   seed=S           the VM's --seed, printed on failure (the agent cannot
 *                    see VM options)
 *   by=class|line|thread
 *                    how samples are grouped: by class name (default), by
 *                    the source line of frame 0 ("L12"), or by thread and
 *                    class ("thread-1/Node")
 *   e=KEY:SIZE:COUNT[:INTERVAL]
 *                    the program allocated COUNT objects of SIZE bytes in
 *                    group KEY, at INTERVAL (default: the interval option)
 *   nhist=1          also test the histogram of sample_count per item
 *   switch=K:J       after K samples of listed items, set the interval to J
 *   ts=THREAD:J      at ThreadStart of THREAD, set the interval to J
 *   digest=1         print `DIGEST <hex>` of the (class, size, count)
 *                    sequence of all samples (single-threaded programs)
 *   noverdict=1      with digest=1: print only the digest
 *   distinct=1       per-thread sample streams must differ: the hash of each
 *                    thread's (size, sample_count) sequence must differ from
 *                    every other thread's (threads allocating identical
 *                    sequences would sample identically if their random
 *                    streams were the same)
 *
 * Stdout gets exactly one line (the verdict, or FAIL lines); details go to
 * stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_agent.h"

#define MAX_ITEMS 64
#define MAX_TS 16
#define HMAX 200
#define ALPHA_TAIL 6.0e-9 /* one tail of the two-sided 5.7 sigma level */
#define Z_MAX 5.7
#define CHI2_P_MIN 1e-8

typedef struct {
  char key[64];
  vmtiLong size;
  vmtiLong count;
  vmtiInt interval;
  /* observed */
  vmtiLong sampled;
  vmtiLong nsum;
  double wsum;
  double vhat; /* sum over samples of s^2 (1-p)/p^2: unbiased variance estimate */
  vmtiLong hist[HMAX + 1];
  int mixed_interval; /* samples came at more than one interval */
} Item;

static vmtiEnv* g_env;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_name[64] = "heapstat";
static long long g_seed = -1;
static vmtiInt g_interval = 524288; /* what the agent last set */
static int g_interval_set;
static enum { BY_CLASS, BY_LINE, BY_THREAD } g_by = BY_CLASS;
static Item g_items[MAX_ITEMS];
static int g_nitems;
static int g_nhist;
static long long g_switch_after = -1;
static vmtiInt g_switch_to;
static int g_switched;
static struct {
  char thread[32];
  vmtiInt interval;
} g_ts[MAX_TS];
static int g_nts;
static int g_digest;
static int g_noverdict;
static int g_distinct;
#define MAX_STREAMS 64
static struct {
  char thread[32];
  uint64_t hash;
  long long samples;
} g_streams[MAX_STREAMS];
static int g_nstreams;
static uint64_t g_hash = 1469598103934665603ULL;
static long long g_samples_listed;
static long long g_samples_total;
static int g_failures;
static char g_first_failure[512];

static void failf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

static void failf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (g_failures == 0) snprintf(g_first_failure, sizeof g_first_failure, "%s", buf);
  g_failures++;
  fprintf(stderr, "heapstat %s: FAIL %s seed=%lld\n", g_name, buf, g_seed);
}

static void hash_bytes(const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; i++) {
    g_hash ^= b[i];
    g_hash *= 1099511628211ULL;
  }
}

/* ---- statistics ------------------------------------------------------ */

/* P(X <= x) and P(X >= x) for X ~ Binomial(n, p), summed exactly in logs. */
static double binom_logpmf(double n, double k, double p) {
  return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) + k * log(p) + (n - k) * log1p(-p);
}
static double binom_lower(long long n, long long x, double p) {
  double sum = 0;
  for (long long k = x; k >= 0; k--) {
    double t = exp(binom_logpmf((double)n, (double)k, p));
    sum += t;
    if (t < sum * 1e-18 && (double)k < n * p) break;
  }
  return sum;
}
static double binom_upper(long long n, long long x, double p) {
  double sum = 0;
  for (long long k = x; k <= n; k++) {
    double t = exp(binom_logpmf((double)n, (double)k, p));
    sum += t;
    if (t < sum * 1e-18 && (double)k > n * p) break;
  }
  return sum;
}
static double pois_logpmf(double mu, double k) { return k * log(mu) - mu - lgamma(k + 1); }
static double pois_lower(double mu, long long x) {
  double sum = 0;
  for (long long k = x; k >= 0; k--) {
    double t = exp(pois_logpmf(mu, (double)k));
    sum += t;
    if (t < sum * 1e-18 && (double)k < mu) break;
  }
  return sum;
}
static double pois_upper(double mu, long long x) {
  double sum = 0;
  for (long long k = x;; k++) {
    double t = exp(pois_logpmf(mu, (double)k));
    sum += t;
    if (t < sum * 1e-18 && (double)k > mu) break;
    if (k > x + 100000000LL) break;
  }
  return sum;
}

/* Regularized upper incomplete gamma Q(a, x) (Numerical Recipes gammq). */
static double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  double gln = lgamma(a);
  if (x < a + 1) {
    double ap = a, sum = 1.0 / a, del = sum;
    for (int n = 0; n < 100000; n++) {
      ap += 1;
      del *= x / ap;
      sum += del;
      if (fabs(del) < fabs(sum) * 1e-16) break;
    }
    return 1.0 - sum * exp(-x + a * log(x) - gln);
  }
  double b = x + 1 - a, c = 1.0 / 1e-300, d = 1.0 / b, h = d;
  for (int i = 1; i < 100000; i++) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (fabs(c) < 1e-300) c = 1e-300;
    d = 1.0 / d;
    double del = d * c;
    h *= del;
    if (fabs(del - 1) < 1e-16) break;
  }
  return exp(-x + a * log(x) - gln) * h;
}
static double chi2_sf(double x, int df) { return gamma_q(df / 2.0, x / 2.0); }

static double p_sampled(vmtiLong size, vmtiInt interval) {
  if (interval == 0) return 1.0;
  return -expm1(-(double)size / (double)interval);
}

/* ---- options --------------------------------------------------------- */

static int parse_item(const char* v) {
  if (g_nitems >= MAX_ITEMS) return 0;
  Item* it = &g_items[g_nitems];
  const char* c1 = strchr(v, ':');
  if (!c1 || (size_t)(c1 - v) >= sizeof it->key) return 0;
  memcpy(it->key, v, (size_t)(c1 - v));
  it->key[c1 - v] = 0;
  long long size = 0, count = 0, interval = -1;
  int n = sscanf(c1 + 1, "%lld:%lld:%lld", &size, &count, &interval);
  if (n < 2 || size <= 0 || count < 0) return 0;
  it->size = size;
  it->count = count;
  it->interval = n == 3 ? (vmtiInt)interval : -1; /* -1: the global interval */
  g_nitems++;
  return 1;
}

static int parse_options(const char* options) {
  if (!options) return 1;
  char* copy = strdup(options);
  char* save = NULL;
  int ok = 1;
  for (char* tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char* eq = strchr(tok, '=');
    if (!eq) { ok = 0; break; }
    *eq = 0;
    const char* k = tok;
    const char* v = eq + 1;
    if (!strcmp(k, "name")) snprintf(g_name, sizeof g_name, "%s", v);
    else if (!strcmp(k, "interval")) { g_interval = (vmtiInt)atol(v); g_interval_set = 1; }
    else if (!strcmp(k, "seed")) g_seed = atoll(v);
    else if (!strcmp(k, "by")) {
      if (!strcmp(v, "class")) g_by = BY_CLASS;
      else if (!strcmp(v, "line")) g_by = BY_LINE;
      else if (!strcmp(v, "thread")) g_by = BY_THREAD;
      else { ok = 0; break; }
    } else if (!strcmp(k, "e")) { if (!parse_item(v)) { ok = 0; break; } }
    else if (!strcmp(k, "nhist")) g_nhist = atoi(v);
    else if (!strcmp(k, "switch")) {
      long long kk, jj;
      if (sscanf(v, "%lld:%lld", &kk, &jj) != 2) { ok = 0; break; }
      g_switch_after = kk;
      g_switch_to = (vmtiInt)jj;
    } else if (!strcmp(k, "ts")) {
      const char* c = strchr(v, ':');
      if (!c || g_nts >= MAX_TS || (size_t)(c - v) >= sizeof g_ts[0].thread) { ok = 0; break; }
      memcpy(g_ts[g_nts].thread, v, (size_t)(c - v));
      g_ts[g_nts].thread[c - v] = 0;
      g_ts[g_nts].interval = (vmtiInt)atol(c + 1);
      g_nts++;
    } else if (!strcmp(k, "digest")) g_digest = atoi(v);
    else if (!strcmp(k, "noverdict")) g_noverdict = atoi(v);
    else if (!strcmp(k, "distinct")) g_distinct = atoi(v);
    else { ok = 0; break; }
  }
  free(copy);
  for (int i = 0; i < g_nitems; i++)
    if (g_items[i].interval < 0) g_items[i].interval = g_interval;
  return ok;
}

/* ---- callbacks ------------------------------------------------------- */

static char* class_name(vmtiEnv* env, vmtiClass klass, char* out, size_t n) {
  char* sig = NULL;
  vmtiError e = (*env)->GetClassSignature(env, klass, &sig, NULL);
  if (e != VMTI_ERROR_NONE || !sig) {
    snprintf(out, n, "?err%d", (int)e);
  } else {
    snprintf(out, n, "%s", sig);
    (*env)->Deallocate(env, (unsigned char*)sig);
  }
  return out;
}

static void on_SampledObjectAlloc(vmtiEnv* env, vmtiThread thread, vmtiObject object,
                                       vmtiClass klass, vmtiLong size) {
  (void)object;
  vmtiSampleInfo info;
  memset(&info, 0, sizeof info);
  vmtiError e = (*env)->GetSampleInfo(env, &info);
  char cls[64];
  class_name(env, klass, cls, sizeof cls);
  char key[128];
  if (g_by == BY_CLASS) {
    snprintf(key, sizeof key, "%s", cls);
  } else if (g_by == BY_LINE) {
    vmtiFrameInfo f[1];
    vmtiInt count = 0;
    vmtiInt line = -1;
    vmtiError se = (*env)->GetStackTrace(env, NULL, 0, 1, f, &count);
    if (se == VMTI_ERROR_NONE && count == 1) {
      if ((*env)->GetLineNumber(env, f[0].method, f[0].location, &line) != VMTI_ERROR_NONE) line = -2;
    }
    snprintf(key, sizeof key, "L%d", (int)line);
  } else {
    vmtiThreadInfo ti;
    memset(&ti, 0, sizeof ti);
    vmtiError te = (*env)->GetThreadInfo(env, thread, &ti);
    snprintf(key, sizeof key, "%s/%s", te == VMTI_ERROR_NONE && ti.name ? ti.name : "?", cls);
    if (ti.name) (*env)->Deallocate(env, (unsigned char*)ti.name);
  }

  char tname[32] = "";
  if (g_distinct) {
    vmtiThreadInfo ti;
    memset(&ti, 0, sizeof ti);
    if ((*env)->GetThreadInfo(env, thread, &ti) == VMTI_ERROR_NONE && ti.name) {
      snprintf(tname, sizeof tname, "%s", ti.name);
      (*env)->Deallocate(env, (unsigned char*)ti.name);
    }
  }

  pthread_mutex_lock(&g_lock);
  g_samples_total++;
  if (g_distinct && tname[0]) {
    int i;
    for (i = 0; i < g_nstreams; i++)
      if (!strcmp(g_streams[i].thread, tname)) break;
    if (i == g_nstreams && g_nstreams < MAX_STREAMS) {
      snprintf(g_streams[i].thread, sizeof g_streams[i].thread, "%s", tname);
      g_streams[i].hash = 1469598103934665603ULL;
      g_nstreams++;
    }
    if (i < g_nstreams) {
      long long s = size, n = info.sample_count;
      const unsigned char* b = (const unsigned char*)&s;
      for (size_t j = 0; j < sizeof s; j++) g_streams[i].hash = (g_streams[i].hash ^ b[j]) * 1099511628211ULL;
      b = (const unsigned char*)&n;
      for (size_t j = 0; j < sizeof n; j++) g_streams[i].hash = (g_streams[i].hash ^ b[j]) * 1099511628211ULL;
      g_streams[i].samples++;
    }
  }
  if (e != VMTI_ERROR_NONE) {
    failf("GetSampleInfo returned %d in SampledObjectAlloc", (int)e);
    pthread_mutex_unlock(&g_lock);
    return;
  }
  if (info.sample_count < 1) failf("sample_count %lld < 1 (size %lld)", (long long)info.sample_count, (long long)size);
  if (info.interval != g_interval)
    failf("sample interval %d, agent set %d (sample %lld)", (int)info.interval, (int)g_interval, g_samples_total);
  {
    double want = info.interval == 0 ? (double)size : (double)size / p_sampled(size, info.interval);
    if (!(fabs(info.weight - want) <= 1e-9 * want))
      failf("weight %.17g for size %lld interval %d, want %.17g", info.weight, (long long)size,
            (int)info.interval, want);
  }
  if (g_digest) {
    hash_bytes(cls, strlen(cls));
    long long s = size, n = info.sample_count;
    hash_bytes(&s, sizeof s);
    hash_bytes(&n, sizeof n);
  }
  int key_known = 0;
  Item* it = NULL;
  for (int i = 0; i < g_nitems; i++) {
    if (strcmp(g_items[i].key, key) != 0) continue;
    key_known = 1;
    if (g_items[i].size == size) { it = &g_items[i]; break; }
  }
  if (key_known && !it) {
    failf("unexpected size %lld in group %s", (long long)size, key);
  } else if (it) {
    it->sampled++;
    it->nsum += info.sample_count;
    it->wsum += info.weight;
    if (info.interval > 0) {
      double p = p_sampled(size, info.interval);
      it->vhat += (double)size * (double)size * (1 - p) / (p * p);
    }
    it->hist[info.sample_count > HMAX ? HMAX : info.sample_count]++;
    if (info.interval != it->interval) it->mixed_interval = 1;
    g_samples_listed++;
    if (g_switch_after >= 0 && !g_switched && g_samples_listed == g_switch_after) {
      g_switched = 1;
      vmtiError se = (*env)->SetHeapSamplingInterval(env, g_switch_to);
      if (se != VMTI_ERROR_NONE) failf("SetHeapSamplingInterval(%d) in callback: %d", (int)g_switch_to, (int)se);
      else g_interval = g_switch_to;
    }
  }
  pthread_mutex_unlock(&g_lock);
}

static void on_ThreadStart(vmtiEnv* env, vmtiThread thread) {
  vmtiThreadInfo ti;
  memset(&ti, 0, sizeof ti);
  vmtiError e = (*env)->GetThreadInfo(env, thread, &ti);
  pthread_mutex_lock(&g_lock);
  if (e != VMTI_ERROR_NONE || !ti.name) {
    failf("GetThreadInfo in ThreadStart: %d", (int)e);
  } else {
    for (int i = 0; i < g_nts; i++) {
      if (strcmp(g_ts[i].thread, ti.name) != 0) continue;
      vmtiError se = (*env)->SetHeapSamplingInterval(env, g_ts[i].interval);
      if (se != VMTI_ERROR_NONE) failf("SetHeapSamplingInterval(%d) at ThreadStart: %d", (int)g_ts[i].interval, (int)se);
      else g_interval = g_ts[i].interval;
    }
  }
  pthread_mutex_unlock(&g_lock);
  if (ti.name) (*env)->Deallocate(env, (unsigned char*)ti.name);
}

/* ---- the verdict ----------------------------------------------------- */

static void check_count_binomial(const Item* it, double p) {
  double mean = (double)it->count * p;
  double sd = sqrt((double)it->count * p * (1 - p));
  double z = sd > 0 ? ((double)it->sampled - mean) / sd : 0;
  fprintf(stderr, "heapstat %s: %s size %lld: sampled %lld of %lld, expected %.2f (p=%.6g) z=%.3f\n",
          g_name, it->key, (long long)it->size, (long long)it->sampled, (long long)it->count, mean, p, z);
  if (p >= 1.0) {
    if (it->sampled != it->count)
      failf("%s size %lld: sampled %lld of %lld, p=1", it->key, (long long)it->size,
            (long long)it->sampled, (long long)it->count);
    return;
  }
  double lo = binom_lower(it->count, it->sampled, p);
  double hi = binom_upper(it->count, it->sampled, p);
  if (lo < ALPHA_TAIL || hi < ALPHA_TAIL)
    failf("%s size %lld: sampled %lld of %lld, expected %.2f z=%.2f P(<=)=%.3g P(>=)=%.3g", it->key,
          (long long)it->size, (long long)it->sampled, (long long)it->count, mean, z, lo, hi);
}

static void check_hist(const Item* it) {
  double mu = (double)it->size / (double)it->interval;
  /* bins k = 0 .. HMAX-1 and k >= HMAX, then adjacent bins pooled until
   * each expects at least 5 objects */
  double e[HMAX + 1], o[HMAX + 1], pe[HMAX + 1], po[HMAX + 1];
  double cum = 0;
  for (int k = 0; k < HMAX; k++) {
    double pk = exp(pois_logpmf(mu, k));
    cum += pk;
    e[k] = pk * (double)it->count;
    o[k] = k == 0 ? (double)(it->count - it->sampled) : (double)it->hist[k];
  }
  e[HMAX] = cum < 1 ? (1 - cum) * (double)it->count : 0;
  o[HMAX] = (double)it->hist[HMAX];
  int nb = 0;
  double ce = 0, co = 0;
  for (int k = 0; k <= HMAX; k++) {
    ce += e[k];
    co += o[k];
    if (ce >= 5) {
      pe[nb] = ce;
      po[nb] = co;
      nb++;
      ce = co = 0;
    }
  }
  if (nb == 0) return;
  pe[nb - 1] += ce;
  po[nb - 1] += co;
  double x2 = 0;
  for (int i = 0; i < nb; i++) x2 += (po[i] - pe[i]) * (po[i] - pe[i]) / pe[i];
  int df = nb - 1;
  double pv = df > 0 ? chi2_sf(x2, df) : 1.0;
  fprintf(stderr, "heapstat %s: %s size %lld: sample_count histogram chi2=%.3f df=%d p=%.3g (mu=%.3f)\n",
          g_name, it->key, (long long)it->size, x2, df, pv, mu);
  if (pv < CHI2_P_MIN)
    failf("%s size %lld: sample_count histogram chi2=%.2f df=%d p=%.3g mu=%.3f", it->key,
          (long long)it->size, x2, df, pv, mu);
}

static void check_group(int first, int* done) {
  const char* key = g_items[first].key;
  double bytes = 0, mu_points = 0, var_ht = 0, chi2 = 0;
  long long nsum = 0;
  double wsum = 0, vhat = 0;
  int k = 0, mixed = 0, zero_interval = 0;
  for (int i = first; i < g_nitems; i++) {
    Item* it = &g_items[i];
    if (strcmp(it->key, key) != 0) continue;
    done[i] = 1;
    if (it->mixed_interval) mixed = 1;
    if (it->interval == 0) zero_interval = 1;
    bytes += (double)it->count * (double)it->size;
    nsum += it->nsum;
    wsum += it->wsum;
    vhat += it->vhat;
  }
  if (mixed) {
    /* The interval changed during the run, at a point that depends on the
     * samples: only the weights keep a known mean (each weight uses the
     * probability in force when its object was allocated), and their
     * variance is estimated from the samples themselves. */
    double z = vhat > 0 ? (wsum - bytes) / sqrt(vhat) : 0;
    fprintf(stderr, "heapstat %s: group %s: HT bytes %.1f, allocated %.0f, z=%.3f (estimated variance)\n",
            g_name, key, wsum, bytes, z);
    if (fabs(z) > Z_MAX) failf("group %s: HT bytes %.1f vs allocated %.0f z=%.2f", key, wsum, bytes, z);
    for (int i = first; i < g_nitems; i++)
      if (!strcmp(g_items[i].key, key) && g_items[i].sampled == 0 && g_items[i].count > 0)
        failf("group %s size %lld: no samples", key, (long long)g_items[i].size);
    return;
  }
  if (zero_interval) {
    for (int i = first; i < g_nitems; i++) {
      Item* it = &g_items[i];
      if (strcmp(it->key, key) != 0) continue;
      if (it->sampled != it->count || it->nsum != it->count || it->wsum != (double)it->count * (double)it->size)
        failf("%s size %lld at interval 0: sampled %lld nsum %lld weight %.0f, want %lld", key,
              (long long)it->size, (long long)it->sampled, (long long)it->nsum, it->wsum, (long long)it->count);
    }
    return;
  }
  for (int i = first; i < g_nitems; i++) {
    Item* it = &g_items[i];
    if (strcmp(it->key, key) != 0) continue;
    double p = p_sampled(it->size, it->interval);
    check_count_binomial(it, p);
    if (g_nhist && (double)it->size >= 0.5 * it->interval) check_hist(it);
    mu_points += (double)it->count * (double)it->size / (double)it->interval;
    if (p < 1.0) {
      var_ht += (double)it->count * (double)it->size * (double)it->size * (1 - p) / p;
      double e = (double)it->count * p;
      /* the normal approximation behind chi-square needs both cells large;
       * sizes with fewer than 5 expected sampled or unsampled objects are
       * left to their exact binomial test */
      if (e >= 5 && (double)it->count * (1 - p) >= 5) {
        chi2 += ((double)it->sampled - e) * ((double)it->sampled - e) / (e * (1 - p));
        k++;
      }
    }
  }
  /* total sample points in the group ~ Poisson(bytes / interval) */
  {
    double lo = pois_lower(mu_points, nsum), hi = pois_upper(mu_points, nsum);
    double z = (nsum - mu_points) / sqrt(mu_points);
    fprintf(stderr, "heapstat %s: group %s: sample_count sum %lld, expected %.2f z=%.3f\n", g_name, key,
            nsum, mu_points, z);
    if (lo < ALPHA_TAIL || hi < ALPHA_TAIL)
      failf("group %s: sample_count sum %lld, expected %.2f z=%.2f P(<=)=%.3g P(>=)=%.3g", key, nsum,
            mu_points, z, lo, hi);
  }
  /* Horvitz-Thompson bytes */
  {
    double z = var_ht > 0 ? (wsum - bytes) / sqrt(var_ht) : 0;
    fprintf(stderr, "heapstat %s: group %s: HT bytes %.1f, allocated %.0f, z=%.3f\n", g_name, key, wsum,
            bytes, z);
    if (var_ht > 0 ? fabs(z) > Z_MAX : fabs(wsum - bytes) > 1e-6 * bytes)
      failf("group %s: HT bytes %.1f vs allocated %.0f z=%.2f", key, wsum, bytes, z);
  }
  /* sampling probability per size: chi-square with k degrees of freedom */
  if (k >= 2) {
    double pv = chi2_sf(chi2, k);
    fprintf(stderr, "heapstat %s: group %s: per-size chi2=%.3f df=%d p=%.3g\n", g_name, key, chi2, k, pv);
    if (pv < CHI2_P_MIN) failf("group %s: per-size chi2=%.2f df=%d p=%.3g", key, chi2, k, pv);
  }
}

static void on_VMDeath(vmtiEnv* env) {
  (void)env;
  pthread_mutex_lock(&g_lock);
  int done[MAX_ITEMS] = {0};
  for (int i = 0; i < g_nitems; i++)
    if (!done[i]) check_group(i, done);
  if (g_distinct) {
    for (int i = 0; i < g_nstreams; i++)
      for (int j = i + 1; j < g_nstreams; j++)
        if (g_streams[i].samples >= 10 && g_streams[i].hash == g_streams[j].hash &&
            g_streams[i].samples == g_streams[j].samples)
          failf("threads %s and %s drew the same %lld samples: per-thread random streams are not independent",
                g_streams[i].thread, g_streams[j].thread, g_streams[i].samples);
    if (g_nstreams < 2) failf("distinct=1 but samples from %d thread(s)", g_nstreams);
  }
  if (g_switch_after >= 0 && !g_switched)
    failf("only %lld listed samples, never reached switch=%lld", g_samples_listed, g_switch_after);
  fprintf(stderr, "heapstat %s: %lld samples (%lld listed)\n", g_name, g_samples_total, g_samples_listed);
  if (g_digest) printf("DIGEST %016llx\n", (unsigned long long)g_hash);
  if (g_failures)
    printf("FAIL %s: %s (%d failures) seed=%lld\n", g_name, g_first_failure, g_failures, g_seed);
  else if (!g_noverdict)
    printf("PASS %s\n", g_name);
  fflush(stdout);
  pthread_mutex_unlock(&g_lock);
}

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  (void)reserved;
  if (!parse_options(options)) {
    fprintf(stderr, "heapstat: bad options '%s'\n", options ? options : "");
    return 1;
  }
  static const vmtiEvent kEvents[] = {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_THREAD_START,
                                      VMTI_EVENT_VM_DEATH, 0};
  TestAgentSetup s = {.capabilities = TA_SAMPLED_ALLOC,
                      .callbacks = {.SampledObjectAlloc = on_SampledObjectAlloc,
                                    .ThreadStart = on_ThreadStart, .VMDeath = on_VMDeath},
                      .set_interval = g_interval_set ? TA_SET_INTERVAL : TA_KEEP_INTERVAL,
                      .interval = g_interval, .events = kEvents};
  g_env = TestAgentStart(vm, &s);
  return g_env ? 0 : 1;
}
