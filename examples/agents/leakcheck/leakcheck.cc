/*
 * leakcheck: finds allocation sites whose live bytes keep growing.
 *
 *   minivm -agentlib:leakcheck prog.mv
 *   minivm -agentlib:leakcheck=every=50,interval=64k prog.mv
 *
 * Options:
 *   interval=BYTES     sampling interval (default 64k: leaks show per site, so
 *                      each site needs samples; about 0.8 us each)
 *   every=N            also report every N collections (default 0: at exit only)
 *   confidence=P       one-sided confidence of the growth bounds (default 0.9999)
 *   depth=N            frames kept per site for the report (default 8)
 *   gc_every=BYTES     force a full collection every BYTES allocated (estimated
 *                      from the samples; default 0: never). Liveness is only
 *                      known at collections: with a large young generation a
 *                      short program may have too few of them to judge.
 *   file=PATH          write reports there instead of stderr
 *
 * Design:
 *  1. Every sample is tagged with a record id and counted live at its site
 *     (innermost frame + class) until ObjectFree; live bytes per site are
 *     Horvitz-Thompson sums over live samples (docs/sampling.md).
 *  2. GarbageCollectionFinish only bumps a counter (raw bookkeeping, as the
 *     API requires). The next SampledObjectAlloc callback, which runs after
 *     the collection's ObjectFree events were delivered, takes a snapshot of
 *     every site's live bytes and live sample count, labelled with the
 *     collection number and the estimated bytes allocated so far.
 *  3. Snapshots are thinned so that memory stays bounded: at most 128 per
 *     site; when full, every other one is dropped and the stride between
 *     snapshots doubles. The analysis window is the recent half of the run
 *     (at least 8 snapshots).
 *  4. A site is reported only if both lower bounds are > 0 at the stated
 *     one-sided confidence (z from `confidence`):
 *       a. the OLS slope of live bytes vs collection number minus z times
 *          its standard error (from the regression's residuals), and
 *       b. a Poisson bound on the growth of its live sample count over the
 *          window, D = live_end - live_start = S - K, where S counts samples
 *          born in the window and still live, and K samples live at the
 *          start that died since. In steady state S and K are independent
 *          Poisson counts (thinnings of disjoint sets of objects) of equal
 *          mean, so D has mean 0 and variance E[S] + E[K], estimated by
 *          S + K = 2S - D; the bound is D - z * sqrt(2S - D). It guards (a)
 *          against the autocorrelation of live-byte series, which makes OLS
 *          standard errors too small.
 *     Rejected: a test on bytes alone (one large sample dominates); the
 *     difference of two snapshot counts with variance live_start + live_end
 *     (far too conservative: a leak's old objects are in both); a fixed
 *     growth threshold (not a statement of confidence).
 */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <utility>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "../common/options.h"
#include "../common/output.h"
#include "../common/sites.h"
#include "vmti/vmti.h"

namespace leakcheck {
namespace {

constexpr const char* kName = "leakcheck";
constexpr size_t kMaxPoints = 128;
constexpr size_t kMinWindow = 8;

struct Config {
  int64_t interval = 64 * 1024;
  int64_t every = 0;
  double confidence = 0.9999;
  int64_t depth = 8;
  int64_t gc_every = 0;
  std::string file;
};

// The upper-tail standard normal quantile: P(Z > z) = 1 - confidence.
double NormalQuantile(double confidence) {
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; i++) {
    double mid = (lo + hi) / 2;
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > 1 - confidence)
      lo = mid;
    else
      hi = mid;
  }
  return (lo + hi) / 2;
}

struct Fit {
  double slope = 0, se = 0;
};
Fit Regress(const std::vector<double>& x, const std::vector<double>& y) {
  Fit f;
  size_t n = x.size();
  if (n < 3) return f;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; i++) {
    mx += x[i];
    my += y[i];
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; i++) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx <= 0) return f;
  f.slope = sxy / sxx;
  double a = my - f.slope * mx, ssr = 0;
  for (size_t i = 0; i < n; i++) {
    double r = y[i] - a - f.slope * x[i];
    ssr += r * r;
  }
  f.se = std::sqrt(ssr / (n - 2) / sxx);
  return f;
}

struct Point {
  int64_t gc;
  double allocated;
  int64_t seq;  // samples taken before this snapshot
};

struct Site {
  uint32_t frame, klass, stack;  // stack: the first one seen, for context
  double live_bytes = 0;
  int64_t live_samples = 0;
  double alloc_bytes = 0;
  int64_t samples = 0;
  std::vector<double> bytes_at;    // one per Point
  std::vector<double> samples_at;  // one per Point
};

struct Record {
  uint32_t site;
  int64_t birth_seq;
  int64_t birth_gc;
  double weight;
  double birth_allocated;
};

class Checker {
 public:
  explicit Checker(Config c) : config_(std::move(c)), log_(kName) {
    z_ = NormalQuantile(config_.confidence);
    next_report_gc_ = config_.every;
    next_gc_at_ = static_cast<double>(config_.gc_every);
  }
  agent::ErrorLog& log() { return log_; }
  const Config& config() const { return config_; }

  void OnSample(vmtiEnv* env, vmtiThread, vmtiObject object, vmtiClass klass, vmtiLong) {
    if (dead_.load(std::memory_order_acquire)) return;
    vmtiSampleInfo info;
    if (!log_.Check(env, (*env)->GetSampleInfo(env, &info), "GetSampleInfo")) return;
    uint32_t stack = sites_.CaptureStack(env, static_cast<int>(config_.depth), &log_);
    uint32_t frame = sites_.LeafFrame(stack);
    uint32_t cls = sites_.ClassName(env, klass, &log_);
    int64_t tag = next_tag_.fetch_add(1, std::memory_order_relaxed);
    bool tagged = log_.Check(env, (*env)->SetTag(env, object, tag), "SetTag");
    std::string report;
    bool force_gc = false;
    {
      std::lock_guard<std::mutex> g(mu_);
      MaybeSnapshotLocked(&report);
      uint32_t s = SiteLocked(frame, cls, stack);
      Site& site = sites_v_[s];
      site.alloc_bytes += info.weight;
      site.samples++;
      if (tagged) {
        site.live_bytes += info.weight;
        site.live_samples++;
        live_.emplace(tag, Record{s, seq_, gc_count_.load(std::memory_order_relaxed), info.weight,
                                  allocated_});
      }
      allocated_ += info.weight;
      seq_++;
      if (config_.gc_every > 0 && allocated_ >= next_gc_at_) {
        next_gc_at_ = allocated_ + static_cast<double>(config_.gc_every);
        force_gc = true;
      }
    }
    Emit(report);
    // Outside the lock: the collection delivers ObjectFree events, which
    // take it, before ForceGarbageCollection returns.
    if (force_gc) {
      log_.Check(env, (*env)->ForceGarbageCollection(env), "ForceGarbageCollection");
    }
  }

  void OnObjectFree(vmtiEnv*, vmtiLong tag) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(tag);
    if (it == live_.end()) return;
    Site& site = sites_v_[it->second.site];
    if (--site.live_samples == 0)
      site.live_bytes = 0;
    else
      site.live_bytes -= it->second.weight;
    live_.erase(it);
  }

  // Inside the pause: raw bookkeeping only.
  void OnGcFinish() { gc_count_.fetch_add(1, std::memory_order_relaxed); }

  void OnVMDeath(vmtiEnv*) {
    dead_.store(true, std::memory_order_release);
    std::string report;
    {
      std::lock_guard<std::mutex> g(mu_);
      TakeSnapshotLocked();
      report = ReportLocked("at exit");
    }
    Emit(report);
    if (out_ != nullptr && out_ != stderr) {
      std::fclose(out_);
      out_ = nullptr;
    }
  }

  bool OpenOutput() {
    if (config_.file.empty()) {
      out_ = stderr;
      return true;
    }
    out_ = std::fopen(config_.file.c_str(), "w");
    return out_ != nullptr;
  }

 private:
  void Emit(const std::string& s) {
    if (s.empty() || out_ == nullptr) return;
    std::fputs(s.c_str(), out_);
    std::fflush(out_);
  }

  uint32_t SiteLocked(uint32_t frame, uint32_t cls, uint32_t stack) {
    uint64_t key = static_cast<uint64_t>(frame) << 32 | cls;
    auto it = site_index_.find(key);
    if (it != site_index_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(sites_v_.size());
    Site s;
    s.frame = frame;
    s.klass = cls;
    s.stack = stack;
    s.bytes_at.assign(points_.size(), 0.0);  // not alive at earlier snapshots
    s.samples_at.assign(points_.size(), 0.0);
    sites_v_.push_back(std::move(s));
    site_index_.emplace(key, id);
    return id;
  }

  void MaybeSnapshotLocked(std::string* report) {
    int64_t gc = gc_count_.load(std::memory_order_relaxed);
    if (gc - last_snapshot_gc_ < stride_) return;
    TakeSnapshotLocked();
    if (config_.every > 0 && gc >= next_report_gc_) {
      next_report_gc_ = gc + config_.every;
      *report = ReportLocked("periodic");
    }
  }

  void TakeSnapshotLocked() {
    int64_t gc = gc_count_.load(std::memory_order_relaxed);
    if (!points_.empty() && points_.back().gc == gc) return;
    last_snapshot_gc_ = gc;
    points_.push_back(Point{gc, allocated_, seq_});
    for (Site& s : sites_v_) {
      s.bytes_at.push_back(s.live_bytes);
      s.samples_at.push_back(static_cast<double>(s.live_samples));
    }
    if (points_.size() >= 2 * kMaxPoints) Thin();
  }

  // Keeps every other snapshot, the newest included, and doubles the stride.
  template <typename T>
  static void KeepOdd(std::vector<T>* v) {
    std::vector<T> out;
    size_t n = v->size();
    for (size_t i = (n - 1) % 2; i < n; i += 2) out.push_back((*v)[i]);
    v->swap(out);
  }
  void Thin() {
    KeepOdd(&points_);
    for (Site& s : sites_v_) {
      KeepOdd(&s.bytes_at);
      KeepOdd(&s.samples_at);
    }
    stride_ *= 2;
  }

  static double Quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
  }

  std::string ReportLocked(const char* when) {
    char line[1024];
    std::string out;
    int64_t gc_now = gc_count_.load(std::memory_order_relaxed);
    size_t n = points_.size();
    if (n < kMinWindow) {
      std::snprintf(line, sizeof line,
                    "leakcheck: %s: %lld collections, too few snapshots (%zu < %zu) to judge "
                    "growth; nothing reported (more collections: a smaller --young, or "
                    "leakcheck=gc_every=BYTES)\n",
                    when, static_cast<long long>(gc_now), n, kMinWindow);
      return line;
    }
    size_t w = std::max(kMinWindow, (n + 1) / 2);
    size_t first = n - w;
    std::vector<double> x, xa;
    for (size_t i = first; i < n; i++) {
      x.push_back(static_cast<double>(points_[i].gc));
      xa.push_back(points_[i].allocated);
    }
    // S per site: live samples born after the window's first snapshot.
    std::vector<double> born_live(sites_v_.size(), 0.0);
    for (const auto& kv : live_) {
      if (kv.second.birth_seq >= points_[first].seq) born_live[kv.second.site] += 1;
    }
    struct Found {
      size_t site;
      Fit fit, fit_alloc;
      double growth, count_lb;
    };
    std::vector<Found> found;
    for (size_t s = 0; s < sites_v_.size(); s++) {
      const Site& site = sites_v_[s];
      std::vector<double> y(site.bytes_at.begin() + first, site.bytes_at.end());
      Fit f = Regress(x, y);
      if (!(f.slope - z_ * f.se > 0)) continue;
      double d = static_cast<double>(site.live_samples) - site.samples_at[first];
      double var = std::max(0.0, 2 * born_live[s] - d);
      double count_lb = d - z_ * std::sqrt(var);
      if (!(count_lb > 0)) continue;
      found.push_back(Found{s, f, Regress(xa, y), d, count_lb});
    }
    std::sort(found.begin(), found.end(),
              [](const Found& a, const Found& b) { return a.fit.slope > b.fit.slope; });
    std::snprintf(line, sizeof line,
                  "leakcheck: %s: %zu growing site%s; window: collections %lld..%lld (%zu "
                  "snapshots), %zu sites checked, lower bounds at %.4g%% one-sided (z = %.2f)\n",
                  when, found.size(), found.size() == 1 ? "" : "s",
                  static_cast<long long>(points_[first].gc),
                  static_cast<long long>(points_.back().gc), w, sites_v_.size(),
                  config_.confidence * 100, z_);
    out += line;
    for (const Found& fd : found) {
      const Site& site = sites_v_[fd.site];
      std::vector<double> age_gc, age_bytes;
      for (const auto& kv : live_) {
        if (kv.second.site != fd.site) continue;
        age_gc.push_back(static_cast<double>(gc_now - kv.second.birth_gc));
        age_bytes.push_back(allocated_ - kv.second.birth_allocated);
      }
      std::snprintf(line, sizeof line,
                    "leakcheck: LEAK? %s [%s]: live %s in %lld samples, growing %s per collection "
                    "(+- %s, lower bound %s), %.2f%% of bytes allocated; live samples %.0f -> %lld "
                    "(growth %.0f, lower bound %.1f)\n",
                    agent::FrameLabel(sites_.GetFrame(site.frame)).c_str(),
                    sites_.GetString(site.klass).c_str(),
                    agent::HumanBytes(site.live_bytes).c_str(),
                    static_cast<long long>(site.live_samples),
                    agent::HumanBytes(fd.fit.slope).c_str(), agent::HumanBytes(fd.fit.se).c_str(),
                    agent::HumanBytes(fd.fit.slope - z_ * fd.fit.se).c_str(),
                    fd.fit_alloc.slope * 100, site.samples_at[first],
                    static_cast<long long>(site.live_samples), fd.growth, fd.count_lb);
      out += line;
      std::snprintf(line, sizeof line,
                    "leakcheck:     ages of live samples: median %.0f collections (p10 %.0f, p90 "
                    "%.0f), median %s allocated since birth (p90 %s)\n",
                    Quantile(age_gc, 0.5), Quantile(age_gc, 0.1), Quantile(age_gc, 0.9),
                    agent::HumanBytes(Quantile(age_bytes, 0.5)).c_str(),
                    agent::HumanBytes(Quantile(age_bytes, 0.9)).c_str());
      out += line;
      std::string chain;
      std::vector<uint32_t> st = sites_.GetStack(site.stack);
      for (size_t i = 0; i < st.size(); i++) {
        chain += (i == 0 ? "" : " <- ") + agent::FrameLabel(sites_.GetFrame(st[i]));
      }
      out += "leakcheck:     allocated at " + chain + "\n";
    }
    return out;
  }

  Config config_;
  agent::ErrorLog log_;
  agent::SiteTable sites_;
  double z_;
  FILE* out_ = nullptr;
  std::atomic<int64_t> next_tag_{1};
  std::atomic<int64_t> gc_count_{0};
  std::atomic<bool> dead_{false};
  std::mutex mu_;  // guards everything below
  std::unordered_map<uint64_t, uint32_t> site_index_;
  std::vector<Site> sites_v_;
  std::unordered_map<int64_t, Record> live_;
  std::vector<Point> points_;
  double allocated_ = 0;
  int64_t seq_ = 0;
  int64_t last_snapshot_gc_ = 0;
  int64_t stride_ = 1;
  int64_t next_report_gc_ = 0;
  double next_gc_at_ = 0;
};

Checker* g_checker = nullptr;

// No C++ exception may unwind into the VM (common/sites.h).
template <typename F>
void Guard(const char* what, F&& f) {
  agent::Guard(kName, what, std::forward<F>(f));
}
void JNI_Sample(vmtiEnv* env, vmtiThread t, vmtiObject o, vmtiClass k, vmtiLong s) {
  Guard("SampledObjectAlloc", [&] { g_checker->OnSample(env, t, o, k, s); });
}
void JNI_ObjectFree(vmtiEnv* env, vmtiLong tag) {
  Guard("ObjectFree", [&] { g_checker->OnObjectFree(env, tag); });
}
void JNI_GcFinish(vmtiEnv*) { g_checker->OnGcFinish(); }  // cannot throw
void JNI_VMDeath(vmtiEnv* env) {
  Guard("VMDeath", [&] { g_checker->OnVMDeath(env); });
}

int ParseConfig(const char* options, Config* c) {
  agent::OptionList list;
  std::string bad;
  if (!agent::SplitOptions(options, &list, &bad)) {
    return agent::BadOption(kName, bad, "", "empty or repeated option");
  }
  for (const auto& [k, v] : list) {
    if (k == "interval") {
      if (!agent::ParseBytes(v, 0, 0x7fffffff, &c->interval)) {
        return agent::BadOption(kName, k, v, "want bytes, e.g. 4096 or 256k");
      }
    } else if (k == "every") {
      if (!agent::ParseInt(v, 0, INT32_MAX, &c->every)) {
        return agent::BadOption(kName, k, v, "want a number of collections (0: exit only)");
      }
    } else if (k == "confidence") {
      if (!agent::ParseDouble(v, 0.5, 1 - 1e-12, &c->confidence)) {
        return agent::BadOption(kName, k, v, "want a probability in [0.5, 1), e.g. 0.9999");
      }
    } else if (k == "depth") {
      if (!agent::ParseInt(v, 1, 4096, &c->depth)) {
        return agent::BadOption(kName, k, v, "want a frame count from 1 to 4096");
      }
    } else if (k == "gc_every") {
      if (!agent::ParseBytes(v, 0, INT64_MAX, &c->gc_every)) {
        return agent::BadOption(kName, k, v, "want bytes, e.g. 64m (0: never)");
      }
    } else if (k == "file") {
      if (v.empty()) return agent::BadOption(kName, k, v, "want a file path");
      c->file = v;
    } else {
      return agent::BadOption(
          kName, k, v,
          "unknown option (known: interval, every, confidence, depth, gc_every, file)");
    }
  }
  return 0;
}

}  // namespace
}  // namespace leakcheck

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  using namespace leakcheck;
  (void)reserved;
  Config config;
  if (ParseConfig(options, &config) != 0) return 1;
  vmtiEnv* env = nullptr;
  if ((*vm)->GetEnv(vm, reinterpret_cast<void**>(&env), VMTI_VERSION_1) != VMTI_ERROR_NONE) {
    std::fprintf(stderr, "leakcheck: GetEnv failed\n");
    return 1;
  }
  auto checker = std::make_unique<Checker>(config);
  if (!checker->OpenOutput()) {
    std::fprintf(stderr, "leakcheck: bad option 'file=%s': %s\n", config.file.c_str(),
                 std::strerror(errno));
    return 1;
  }
  agent::ErrorLog& log = checker->log();
  vmtiCapabilities caps;
  std::memset(&caps, 0, sizeof caps);
  caps.can_generate_sampled_alloc_events = 1;
  caps.can_tag_objects = 1;
  caps.can_generate_object_free_events = 1;
  caps.can_generate_garbage_collection_events = 1;
  if (!log.Check(env, (*env)->AddCapabilities(env, &caps), "AddCapabilities")) return 1;
  vmtiEventCallbacks cb;
  std::memset(&cb, 0, sizeof cb);
  cb.VMDeath = &JNI_VMDeath;
  cb.SampledObjectAlloc = &JNI_Sample;
  cb.ObjectFree = &JNI_ObjectFree;
  cb.GarbageCollectionFinish = &JNI_GcFinish;
  if (!log.Check(env, (*env)->SetEventCallbacks(env, &cb, static_cast<vmtiInt>(sizeof cb)),
                 "SetEventCallbacks") ||
      !log.Check(env, (*env)->SetHeapSamplingInterval(env, static_cast<vmtiInt>(config.interval)),
                 "SetHeapSamplingInterval")) {
    return 1;
  }
  for (vmtiEvent e : {VMTI_EVENT_VM_DEATH, VMTI_EVENT_OBJECT_FREE,
                      VMTI_EVENT_GARBAGE_COLLECTION_FINISH, VMTI_EVENT_SAMPLED_OBJECT_ALLOC}) {
    if (!log.Check(env, (*env)->SetEventNotificationMode(env, VMTI_ENABLE, e, nullptr),
                   "SetEventNotificationMode")) {
      return 1;
    }
  }
  g_checker = checker.release();
  return 0;
}
