/*
 * leakcheck: finds allocation sites whose objects accumulate (leak).
 *
 *   minivm -agentlib:leakcheck prog.mv
 *   minivm -agentlib:leakcheck=every=50,interval=16k prog.mv
 *
 * Options:
 *   interval=BYTES     sampling interval (default 32k: a leak is judged per
 *                      site, so each site needs samples; about 0.8 us each)
 *   every=N            also report every N collections (default 0: at exit only)
 *   confidence=P       1 - the bound on the chance that a report names any
 *                      site that does not leak (default 0.9999)
 *   depth=N            frames kept per site for the report (default 8)
 *   gc_every=auto|BYTES
 *                      when to force a full collection: on the schedule below
 *                      (auto, the default), or when BYTES were allocated
 *                      since the last one the agent forced
 *   file=PATH          write the report there instead of stderr (checked at
 *                      load; each report replaces the file's content)
 *   paths=on|off       each reported site's shortest path from a GC root
 *                      (default on; .why-alive)
 *   path_objects=N     the path search's budget in objects (default 2000000)
 *   path_seconds=S     and in seconds of walking (default 2)
 *
 * Design (docs/tools.md, "leakcheck", states the test and its bound):
 * .tagging  Every sample is tagged and recorded (site = innermost frame + class,
 *     weight, birth) until ObjectFree.
 * .snapshots  Snapshots only at full collections that the agent forces. Liveness is
 *     only known at collections, and only a full one tells which old
 *     objects died: after a minor collection an old object that died long
 *     ago still looks live (which made the growth of a steady program's
 *     long-lived objects look like a leak). VMTI does not say which
 *     collections were full, so the agent forces its own
 *     (ForceGarbageCollection) and takes a snapshot right after each, once
 *     its ObjectFree events are in: a collection forced inside a callback
 *     delivers them when the callback returns, so the snapshot is taken at
 *     the forcing thread's next sample (or at VMDeath). A snapshot is a
 *     Point (ordinal, collection number, estimated bytes allocated). A
 *     sample born between snapshots o-1 and o gets birth ordinal o; a death
 *     delivered between them gets death ordinal o; so a sample was live at
 *     snapshot j iff birth <= j < death. Per site, deaths are counted by
 *     (birth, death) ordinal, only for samples live at two or more
 *     snapshots (the only ones the test uses): most samples die young and
 *     leave nothing behind.
 * .test  The test. t1 is the last snapshot; t0 and tm the snapshots with the
 *     longest tm - t0 <= t1 - tm in bytes allocated, t0 at a quarter of
 *     t1's allocation or later (what a program builds when it starts is
 *     older). Per site,
 *       A = samples born in (t0, tm] still live at t1,
 *       K = samples born at or before t0, live at tm, dead by t1.
 *     For a site whose allocation is stationary in bytes allocated (any
 *     lifetime distribution, however long), E[A] <= E[K]: with h1 = tm - t0
 *     and h2 = t1 - tm, both count the objects whose lifetimes fall in a
 *     range, [h2, h1 + h2] for A and [h1, h1 + h2] for K, which contains
 *     it. A leak adds to A (objects that never die) and nothing to K.
 *     Samples of disjoint objects are independent Poisson-like counts, so
 *     given n = A + K, A is at most Binomial(n, 1/2) without a leak: the
 *     p-value P(Binomial(n, 1/2) >= A) is exact. Only objects that live
 *     longer than h1 count, so a working set that grows with the program's
 *     phase (binary_trees.mv's trees of each depth) is not a leak, and the
 *     objects allocated since the last snapshot, whose fate is unknown, do
 *     not count at all.
 * .many-sites  Many sites are tested at once: Tarone's Bonferroni correction. A site
 *     with n samples cannot reach p < 2^-n; the smallest k such that at
 *     most k sites could reach alpha/k is found, and each site is tested at
 *     alpha/k (alpha = 1 - confidence). The chance that a report names any
 *     site that does not leak is then at most alpha.
 * .schedule  The schedule: a full collection when the estimated bytes allocated
 *     since the last forced one reach max(4 MiB, a quarter of all bytes
 *     allocated so far, the live bytes at the last snapshot): 4 + 3.5 ln(T
 *     / 16 MiB) collections for T bytes allocated (10 for 100 MiB, 19 for
 *     1 GiB), tracing at most 2 bytes per byte allocated. A pacer is the
 *     safety net for heaps whose full collections are slow: none starts
 *     while the pauses so far exceed half the wall-clock time since load
 *     and add up to a quarter second.
 * .cap  Points are capped at 128 (the schedule makes about 40 for 1 TiB):
 *     when full, every other one is dropped (the newest kept) and death
 *     counts move to the kept ordinals.
 * .why-alive  Why it is still alive: for each site a report names, the shortest
 *     path from a GC root to one of the site's sampled objects still live
 *     (up to 256 of them), printed with repeated links folded (`global
 *     cache -> Cache.buckets -> Array[7] -> Entry.next x 12 -> Entry`), as
 *     JFR's and MAT's paths to GC roots. One breadth-first search per
 *     report for all its sites (common/retention.h), after the report's
 *     lock is released (the search stops the world), bounded by
 *     path_objects and path_seconds (beyond them: "cut off"); its pause is
 *     printed with the report, and the VM logs each walk with --verbose:gc.
 *  Rejected: an OLS slope of live bytes against collections (live-byte
 *  series are autocorrelated, so its standard error is far too small); the
 *  growth of the live sample count over the window, all ages (it is the
 *  growth of the live set, which a program's phases change without a leak;
 *  with samples of unknown fate counted live at VM death and minor
 *  collections taken for full ones, the causes of false reports on
 *  binary_trees.mv); a final collection at VM death (other agents would
 *  get ObjectFree events after their VMDeath).
 */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../common/agent.h"
#include "../common/errors.h"
#include "../common/options.h"
#include "../common/output.h"
#include "../common/retention.h"
#include "../common/sites.h"
#include "vmti/vmti.h"

namespace leakcheck {
namespace {

constexpr size_t kMaxPoints = 128;
// Forced collections (.schedule).
constexpr double kMinGap = 4 << 20;       // at least 4 MiB allocated apart,
constexpr double kGapFraction = 0.25;     // and a quarter of all allocated so far;
constexpr double kForcedTimeShare = 0.5;  // pauses under half the wall-clock time,
constexpr double kUnpacedNs = 250e6;      // once they add up to a quarter second

struct Config {
  int64_t interval = 32 * 1024;
  int64_t every = 0;
  double confidence = 0.9999;
  int64_t depth = 8;
  int64_t gc_every = -1;  // -1: auto; else bytes
  std::string file;
  bool paths = true;                // retention paths for reported sites
  agent::RetentionBudget path_budget;
};

// Samples per site whose paths to GC roots are searched (the nearest wins).
constexpr size_t kPathTargetsPerSite = 256;

// A report: its text, and for each site it names, the live samples whose
// path to a GC root is to be found and printed under it (after the lock is
// released: the search needs a safepoint, and other threads' callbacks may
// be waiting for the lock).
struct Report {
  std::string head;
  struct SiteText {
    std::string text;
    std::string allocated_at;  // the site's frame label
    std::vector<vmtiLong> tags;
  };
  std::vector<SiteText> sites;
  bool empty() const { return head.empty() && sites.empty(); }
};

// log P(X >= a) for X ~ Binomial(n, 1/2).
double LogBinomialTailHalf(int64_t n, int64_t a) {
  if (a <= 0) return 0;
  if (a > n) return -std::numeric_limits<double>::infinity();
  const double ln2n = static_cast<double>(n) * std::log(2.0);
  const double lgn = std::lgamma(static_cast<double>(n) + 1);
  auto term = [&](int64_t k) {
    return lgn - std::lgamma(static_cast<double>(k) + 1) -
           std::lgamma(static_cast<double>(n - k) + 1) - ln2n;
  };
  // The largest term is at k = max(a, n/2).
  const double top = term(std::max(a, n / 2));
  double sum = 0;
  for (int64_t k = a; k <= n; k++) sum += std::exp(term(k) - top);
  return top + std::log(sum);
}

struct Point {
  int64_t ordinal;   // snapshots taken before this one; never renumbered
  int64_t gc;        // collections finished
  double allocated;  // estimated bytes allocated by then
};

// Samples that died, by (birth ordinal, death ordinal).
struct Deaths {
  double count = 0, weight = 0, weight2 = 0;
};

struct Site {
  Site(uint32_t f, uint32_t k, uint32_t st) : frame(f), klass(k), stack(st) {}
  uint32_t frame, klass, stack;  // stack: the first one seen, for context
  double live_bytes = 0;
  int64_t live_samples = 0;
  double snapshot_bytes = 0;  // live_bytes and live_samples at the last snapshot
  int64_t snapshot_samples = 0;
  std::unordered_map<uint64_t, Deaths> deaths;  // key: birth << 32 | death
};

uint64_t DeathKey(int64_t birth, int64_t death) {
  return static_cast<uint64_t>(birth) << 32 | static_cast<uint32_t>(death);
}

struct Record {
  uint32_t site;
  int64_t birth;  // snapshot ordinal
  int64_t birth_gc;
  double weight;
  double birth_allocated;
};

// One site's test over a window.
struct Count {
  double a = 0, a_w = 0, a_w2 = 0;  // born in (t0, tm], live at t1
  double k = 0, k_w = 0, k_w2 = 0;  // born <= t0, live at tm, dead by t1
};

class Checker {
 public:
  static constexpr const char* kName = "leakcheck";
  using Config = leakcheck::Config;

  // The instance's side of agent::Start (common/agent.h).
  static void DeclareOptions(Config* c, agent::OptionParser* p) {
    p->Interval(&c->interval);
    p->Int("every", &c->every, 0, INT32_MAX, "a number of collections");
    p->Double("confidence", &c->confidence, 0.5, 1 - 1e-12,
              "a probability in [0.5, 1), e.g. 0.9999");
    p->Depth(&c->depth);
    p->Custom("gc_every", "auto or bytes such as 64m", [c](const std::string& v) {
      if (v != "auto") return agent::ParseBytes(v, 1, INT64_MAX, &c->gc_every);
      c->gc_every = -1;
      return true;
    });
    agent::DeclareOutputOption(p, "file", &c->file);  // checked now, written at each report
    p->Custom("paths", "on or off", [c](const std::string& v) {
      if (v != "on" && v != "off") return false;
      c->paths = v == "on";
      return true;
    });
    p->Int("path_objects", &c->path_budget.max_objects, 1, INT32_MAX, "a number of objects");
    p->Double("path_seconds", &c->path_budget.max_seconds, 0.001, 3600,
              "seconds from 0.001 to 3600, e.g. 2");
  }

  static std::unique_ptr<Checker> Create(Config c, vmtiVM* vm, vmtiEnv* env) {
    // The path search's scratch tags live in an environment of their own,
    // so they never touch the sample tags (common/retention.h).
    vmtiEnv* walk_env = nullptr;
    if (c.paths) {
      walk_env = agent::NewWalkEnvironment(vm, kName);
      if (walk_env == nullptr) return nullptr;
    }
    return std::make_unique<Checker>(std::move(c), env, walk_env);
  }

  Checker(Config c, vmtiEnv* env, vmtiEnv* walk_env)
      : config_(std::move(c)), log_(kName), env_(env), walk_env_(walk_env) {
    next_report_gc_ = config_.every;
    (*env_)->GetTime(env_, &start_ns_);
  }

  // Handlers: OnSample, OnObjectFree, OnGcFinish, OnVMDeath (common/agent.h).
  void Configure(agent::Setup* setup) const { setup->interval = config_.interval; }

  agent::ErrorLog& log() { return log_; }

  void OnSample(vmtiEnv* env, vmtiThread, vmtiObject object, vmtiClass klass, vmtiLong) {
    if (dead_.load(std::memory_order_acquire)) return;
    if (std::optional<Report> owed = OwedSnapshot(/*any_thread=*/false)) Emit(Compose(*owed));
    agent::Sample sample;
    if (!sites_.Capture(env, object, klass, config_.depth, &next_tag_, &log_, &sample)) return;
    const uint32_t frame = sites_.LeafFrame(sample.stack);
    bool force = false;
    {
      std::lock_guard<std::mutex> g(mu_);
      bool added = false;
      const uint32_t s = site_ids_.Get(frame, sample.klass, &added);
      if (added) sites_v_.emplace_back(frame, sample.klass, sample.stack);
      const double weight = sample.info.weight;
      if (sample.tag != 0) {
        Site& site = sites_v_[s];
        site.live_bytes += weight;
        site.live_samples++;
        live_bytes_ += weight;
        live_.emplace(sample.tag, Record{s, pending_, gc_count_.load(std::memory_order_relaxed),
                                         weight, allocated_});
      }
      allocated_ += weight;
      force = ForceDueLocked();
      if (force) forcing_ = true;
    }
    // Outside the lock: the collection's ObjectFree events take it. They
    // are delivered once this callback returns (docs/agent-api.md,
    // "Delivery rules"), so the snapshot waits for this thread's next
    // sample (the design's snapshot rule, point "Snapshots only at full
    // collections" above).
    if (force) Force(env);
  }

  void OnObjectFree(vmtiEnv*, vmtiLong tag) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(tag);
    if (it == live_.end()) return;
    const Record& r = it->second;
    Site& site = sites_v_[r.site];
    live_bytes_ -= r.weight;
    if (--site.live_samples == 0)
      site.live_bytes = 0;  // no drift from rounding
    else
      site.live_bytes -= r.weight;
    // Dies before snapshot pending_; kept only if live at two or more.
    if (PointsIn(r.birth, pending_) >= 2) {
      Deaths& d = site.deaths[DeathKey(r.birth, pending_)];
      d.count += 1;
      d.weight += r.weight;
      d.weight2 += r.weight * r.weight;
    }
    live_.erase(it);
  }

  // Inside the pause: raw bookkeeping only.
  void OnGcFinish(vmtiEnv*) { gc_count_.fetch_add(1, std::memory_order_relaxed); }

  void OnVMDeath(vmtiEnv*) {
    dead_.store(true, std::memory_order_release);
    // Every event of a completed collection is delivered before VMDeath.
    if (std::optional<Report> owed = OwedSnapshot(/*any_thread=*/true)) Emit(Compose(*owed));
    Report report;
    {
      std::lock_guard<std::mutex> g(mu_);
      report = ReportLocked("at exit");
    }
    Emit(Compose(report));
  }

 private:
  // To stderr, or as the whole content of file= (common/output.h).
  void Emit(const std::string& report) { agent::EmitReport(kName, config_.file, report); }

  bool ForceDueLocked() const {
    if (forcing_) return false;
    const double since = allocated_ - schedule_from_;
    if (config_.gc_every > 0) return since >= static_cast<double>(config_.gc_every);
    return since >= std::max({kMinGap, kGapFraction * allocated_, live_at_snapshot_});
  }

  // Forces a full collection from the sample callback that found it due.
  // The snapshot is owed until the callback has returned: the collection's
  // ObjectFree events are delivered then, on this thread, before it goes on
  // (except those of an object whose promotion another thread is still
  // delivering: they follow it, and count as deaths after the snapshot).
  // This thread's next sample takes it (OwedSnapshot), or VMDeath.
  void Force(vmtiEnv* env) {
    const bool paced = config_.gc_every < 0;
    vmtiLong start = 0, end = 0;
    bool run = true;
    if (paced) {
      (*env)->GetTime(env, &start);
      std::lock_guard<std::mutex> g(mu_);
      // The pacer: a safety net for heaps whose full collections are slow
      // (the schedule bounds their number, not their length). Pauses that
      // add up to less than kUnpacedNs cost no one anything worth saving,
      // and their wall-clock share is mostly scheduling noise: a 1 ms
      // pause the kernel preempts takes 10 ms, and in a 50 ms run a busy
      // machine could hold back every collection.
      run = forced_ns_ < kUnpacedNs ||
            forced_ns_ <= kForcedTimeShare * static_cast<double>(start - start_ns_);
    }
    // Once the VM is dying it skips the collection (WRONG_PHASE, expected
    // then, not worth a line); and a snapshot needs a collection to have
    // happened, whatever a host answers.
    const int64_t gc_before = gc_count_.load(std::memory_order_relaxed);
    const vmtiError err = run ? (*env)->ForceGarbageCollection(env) : VMTI_ERROR_NONE;
    const bool ok = run && err != VMTI_ERROR_WRONG_PHASE &&
                    log_.Check(env, err, "ForceGarbageCollection") &&
                    gc_count_.load(std::memory_order_relaxed) > gc_before;
    if (ok && paced) (*env)->GetTime(env, &end);
    std::lock_guard<std::mutex> g(mu_);
    schedule_from_ = allocated_;  // the next one after another gap
    if (!ok) {
      forcing_ = false;
      if (!run) paced_++;
      return;
    }
    forced_++;
    if (paced) forced_ns_ += static_cast<double>(end - start);
    owed_by_ = std::this_thread::get_id();  // forcing_ stays set until it is taken
    owed_gc_ = gc_count_.load(std::memory_order_relaxed);
  }

  // The snapshot of the collection Force ran, if one is owed to this
  // thread (or, at VMDeath, to any thread). Returns the periodic report
  // then due, if any.
  std::optional<Report> OwedSnapshot(bool any_thread) {
    std::lock_guard<std::mutex> g(mu_);
    if (!owed_by_ || (!any_thread && *owed_by_ != std::this_thread::get_id())) {
      return std::nullopt;
    }
    owed_by_.reset();
    forcing_ = false;
    live_at_snapshot_ = live_bytes_;
    for (Site& site : sites_v_) {
      site.snapshot_bytes = site.live_bytes;
      site.snapshot_samples = site.live_samples;
    }
    points_.push_back(Point{pending_++, owed_gc_, allocated_});
    if (points_.size() >= kMaxPoints) Thin();
    const int64_t gc = points_.back().gc;
    if (config_.every > 0 && gc >= next_report_gc_) {
      next_report_gc_ = gc + config_.every;
      return ReportLocked("periodic");
    }
    return Report();
  }

  // The report's text, with each site's path to a GC root found now (one
  // search for all of them: .why-alive).
  std::string Compose(const Report& r) {
    std::string out = r.head;
    std::vector<std::vector<vmtiLong>> queries;
    for (const Report::SiteText& site : r.sites) queries.push_back(site.tags);
    agent::RetentionResult paths;
    bool search = config_.paths && !queries.empty();
    if (search) {
      paths = agent::FindRetentionPaths(env_, walk_env_, queries, config_.path_budget);
      search = !paths.unsupported;
    }
    char line[512];
    for (size_t i = 0; i < r.sites.size(); i++) {
      out += r.sites[i].text;
      if (!search) continue;
      if (!paths.error.empty()) {
        out += "leakcheck:     retained by: unknown (" + paths.error + ")\n";
        continue;
      }
      const agent::RetentionPath& p = paths.paths[i];
      out += "leakcheck:     retained by: " + p.Text();
      if (p.status == agent::RetentionPath::Status::kFound) {
        out += " (allocated at " + r.sites[i].allocated_at + ")";
      }
      out += "\n";
    }
    if (search && paths.error.empty()) {
      std::snprintf(line, sizeof line,
                    "leakcheck:     paths to GC roots: %s objects visited in a pause of %.1f ms%s "
                    "(budget %s objects, %.3g s)\n",
                    agent::WithCommas(paths.visited).c_str(), paths.pause_ms,
                    paths.cut_off ? ", cut off" : "",
                    agent::WithCommas(config_.path_budget.max_objects).c_str(),
                    config_.path_budget.max_seconds);
      out += line;
    }
    return out;
  }

  // Kept points with ordinals in [from, to).
  size_t PointsIn(int64_t from, int64_t to) const {
    auto lo = std::lower_bound(points_.begin(), points_.end(), from,
                               [](const Point& p, int64_t o) { return p.ordinal < o; });
    auto hi = std::lower_bound(points_.begin(), points_.end(), to,
                               [](const Point& p, int64_t o) { return p.ordinal < o; });
    return static_cast<size_t>(hi - lo);
  }

  // Keeps every other point, the newest included: for gc_every=BYTES, and
  // as a safety net for auto (which reaches 128 points only after about
  // 2^51 times 16 MiB). Death counts move to the kept ordinals: a birth or
  // death ordinal o becomes the first kept ordinal >= o, which leaves every
  // comparison with a kept ordinal unchanged (the test only compares with
  // those).
  void Thin() {
    std::vector<Point> kept;
    const size_t n = points_.size();
    for (size_t i = (n - 1) % 2; i < n; i += 2) kept.push_back(points_[i]);
    points_.swap(kept);
    auto up = [this](int64_t o) {
      auto it = std::lower_bound(points_.begin(), points_.end(), o,
                                 [](const Point& p, int64_t x) { return p.ordinal < x; });
      return it == points_.end() ? o : it->ordinal;  // o == pending_: not a point yet
    };
    for (Site& s : sites_v_) {
      std::unordered_map<uint64_t, Deaths> merged;
      for (const auto& [key, d] : s.deaths) {
        const int64_t birth = up(static_cast<int64_t>(key >> 32));
        const int64_t death = up(static_cast<int64_t>(key & 0xffffffffu));
        if (PointsIn(birth, death) < 2) continue;
        Deaths& m = merged[DeathKey(birth, death)];
        m.count += d.count;
        m.weight += d.weight;
        m.weight2 += d.weight2;
      }
      s.deaths.swap(merged);
    }
  }

  static double Quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
  }

  // Picks t0, tm, t1 (indexes into points_); false if there are too few.
  // t1 is the last point. t0 >= T/4 for T the bytes allocated at t1, so
  // that what a program builds when it starts (a table, a long-lived tree)
  // is born before t0 and never counted in A. Among those, the pair with
  // the longest tm - t0 <= t1 - tm: the test's power grows with the
  // number of leaked samples born in (t0, tm].
  bool WindowLocked(size_t* t0, size_t* tm, size_t* t1) const {
    if (points_.size() < 3) return false;
    *t1 = points_.size() - 1;
    const double total = points_[*t1].allocated;
    double best = 0;
    for (size_t i = 0; i + 2 <= *t1; i++) {
      const double a0 = points_[i].allocated;
      if (a0 < total / 4) continue;
      for (size_t j = i + 1; j < *t1; j++) {
        const double h1 = points_[j].allocated - a0;
        if (h1 > total - points_[j].allocated) break;
        if (h1 > best) {
          best = h1;
          *t0 = i;
          *tm = j;
        }
      }
    }
    return best > 0;
  }

  // "5 full collections forced by leakcheck (78.4 ms, 23.2% of 0.3 s), 35
  // in all": how much liveness information there was, and its cost.
  std::string CollectionsLocked(int64_t gc_now) const {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%lld full collection%s forced by leakcheck",
                  static_cast<long long>(forced_), forced_ == 1 ? "" : "s");
    std::string out = buf;
    if (config_.gc_every < 0 && forced_ > 0) {
      vmtiLong now = start_ns_;
      (*env_)->GetTime(env_, &now);  // any thread, any phase
      const double run_ns = static_cast<double>(now - start_ns_);
      std::snprintf(buf, sizeof buf, " (%.1f ms, %.1f%% of %.3g s", forced_ns_ / 1e6,
                    run_ns > 0 ? 100 * forced_ns_ / run_ns : 0.0, run_ns / 1e9);
      out += buf;
      if (paced_ > 0) {
        std::snprintf(buf, sizeof buf, "; %lld more held back to stay under %.0f%%",
                      static_cast<long long>(paced_), 100 * kForcedTimeShare);
        out += buf;
      }
      out += ")";
    }
    std::snprintf(buf, sizeof buf, ", %lld collection%s in all", static_cast<long long>(gc_now),
                  gc_now == 1 ? "" : "s");
    return out + buf;
  }

  Report ReportLocked(const char* when) {
    char line[2048];
    Report report;
    std::string& out = report.head;
    const int64_t gc_now = gc_count_.load(std::memory_order_relaxed);
    size_t i0 = 0, im = 0, i1 = 0;
    const std::string collections = CollectionsLocked(gc_now);
    if (!WindowLocked(&i0, &im, &i1)) {
      std::snprintf(line, sizeof line,
                    "leakcheck: %s: too few snapshots to judge growth (it needs three full "
                    "collections, the first a quarter of the way into the run or later; %s; "
                    "est. %s allocated); nothing reported\n",
                    when, collections.c_str(), agent::HumanBytes(allocated_).c_str());
      out = line;
      return report;
    }
    const int64_t t0 = points_[i0].ordinal, tm = points_[im].ordinal, t1 = points_[i1].ordinal;
    std::vector<Count> counts(sites_v_.size());
    for (const auto& kv : live_) {
      const Record& r = kv.second;
      if (r.birth > t0 && r.birth <= tm) {
        Count& c = counts[r.site];
        c.a += 1;
        c.a_w += r.weight;
        c.a_w2 += r.weight * r.weight;
      }
    }
    for (size_t s = 0; s < sites_v_.size(); s++) {
      Count& c = counts[s];
      for (const auto& [key, d] : sites_v_[s].deaths) {
        const int64_t birth = static_cast<int64_t>(key >> 32);
        const int64_t death = static_cast<int64_t>(key & 0xffffffffu);
        if (birth > t0 && birth <= tm && death > t1) {
          c.a += d.count;
          c.a_w += d.weight;
          c.a_w2 += d.weight2;
        } else if (birth <= t0 && death > tm && death <= t1) {
          c.k += d.count;
          c.k_w += d.weight;
          c.k_w2 += d.weight2;
        }
      }
    }
    // Tarone: the smallest k such that at most k sites could reach alpha/k
    // (a site with n samples cannot go below 2^-n).
    const double alpha = 1 - config_.confidence;
    std::vector<double> ns;
    for (const Count& c : counts) {
      if (c.a + c.k > 0) ns.push_back(c.a + c.k);
    }
    size_t k = 1;
    for (;; k++) {
      const double need = std::log2(static_cast<double>(k) / alpha);
      size_t testable = 0;
      for (double n : ns) testable += n >= need ? 1 : 0;
      if (testable <= k) break;
    }
    const double level = alpha / static_cast<double>(k);
    struct Found {
      size_t site;
      double log_p;
    };
    std::vector<Found> found;
    for (size_t s = 0; s < counts.size(); s++) {
      const Count& c = counts[s];
      if (c.a <= c.k) continue;
      const double log_p = LogBinomialTailHalf(std::llround(c.a + c.k), std::llround(c.a));
      if (log_p < std::log(level)) found.push_back(Found{s, log_p});
    }
    std::sort(found.begin(), found.end(),
              [](const Found& a, const Found& b) { return a.log_p < b.log_p; });
    std::snprintf(line, sizeof line,
                  "leakcheck: %s: %zu growing site%s of %zu (%zu with samples to test, tested at "
                  "p < %.2g each: at most a %.4g%% chance of naming any site that does not "
                  "leak)\n",
                  when, found.size(), found.size() == 1 ? "" : "s", sites_v_.size(), ns.size(),
                  level, alpha * 100);
    out += line;
    std::snprintf(line, sizeof line,
                  "leakcheck:     window: born at %s..%s allocated, live at %s (snapshots %zu, "
                  "%zu, %zu; %s)\n",
                  agent::HumanBytes(points_[i0].allocated).c_str(),
                  agent::HumanBytes(points_[im].allocated).c_str(),
                  agent::HumanBytes(points_[i1].allocated).c_str(), i0 + 1, im + 1, i1 + 1,
                  collections.c_str());
    out += line;
    const double h = points_[im].allocated - points_[i0].allocated;
    for (const Found& fd : found) {
      const Site& site = sites_v_[fd.site];
      const Count& c = counts[fd.site];
      report.sites.emplace_back();
      std::string& out = report.sites.back().text;
      report.sites.back().allocated_at = agent::FrameLabel(sites_.GetFrame(site.frame));
      std::vector<vmtiLong>& targets = report.sites.back().tags;
      // Ages at t1 of the samples live then and still live.
      std::vector<double> age_gc, age_bytes;
      for (const auto& kv : live_) {
        if (kv.second.site != fd.site) continue;
        if (targets.size() < kPathTargetsPerSite) targets.push_back(kv.first);
        if (kv.second.birth > t1) continue;
        age_gc.push_back(static_cast<double>(points_[i1].gc - kv.second.birth_gc));
        age_bytes.push_back(points_[i1].allocated - kv.second.birth_allocated);
      }
      std::snprintf(line, sizeof line,
                    "leakcheck: LEAK? %s [%s]: live %s in %lld samples, growing %.2f%% of bytes "
                    "allocated (+- %.2f%%)\n",
                    agent::FrameLabel(sites_.GetFrame(site.frame)).c_str(),
                    sites_.GetString(site.klass).c_str(),
                    agent::HumanBytes(site.snapshot_bytes).c_str(),
                    static_cast<long long>(site.snapshot_samples), 100 * (c.a_w - c.k_w) / h,
                    100 * std::sqrt(c.a_w2 + c.k_w2) / h);
      out += line;
      char p[32];
      if (fd.log_p > std::log(1e-300)) {
        std::snprintf(p, sizeof p, "p = %.2g", std::exp(fd.log_p));
      } else {
        std::snprintf(p, sizeof p, "p < 1e-300");
      }
      std::snprintf(line, sizeof line,
                    "leakcheck:     %.0f samples born in the window still live, %.0f older ones "
                    "died in its second half (%s)\n",
                    c.a, c.k, p);
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
    return report;
  }

  const Config config_;
  agent::ErrorLog log_;
  vmtiEnv* const env_;       // this instance's, for GetTime
  vmtiEnv* const walk_env_;  // scratch tags of the path search (common/retention.h)
  vmtiLong start_ns_ = 0;
  agent::SiteTable sites_;
  std::atomic<int64_t> next_tag_{1};
  std::atomic<int64_t> gc_count_{0};
  std::atomic<bool> dead_{false};
  std::mutex mu_;  // guards everything below
  agent::SiteIds site_ids_;
  std::vector<Site> sites_v_;  // indexed by site_ids_
  std::unordered_map<int64_t, Record> live_;
  std::vector<Point> points_;    // ascending ordinals
  int64_t pending_ = 0;          // the next snapshot's ordinal
  double allocated_ = 0;         // estimated bytes allocated (sum of weights)
  double live_bytes_ = 0;        // estimated live bytes (all sites)
  double live_at_snapshot_ = 0;  // live_bytes_ at the last snapshot
  double schedule_from_ = 0;     // forced collections count allocation from here
  int64_t next_report_gc_ = 0;
  // Forced collections.
  bool forcing_ = false;  // one at a time, from Force until its snapshot
  // The thread whose callback forced the collection whose snapshot is
  // still to be taken (Force, OwedSnapshot), and that collection's number.
  std::optional<std::thread::id> owed_by_;
  int64_t owed_gc_ = 0;
  int64_t forced_ = 0;
  int64_t paced_ = 0;     // skipped by the pacer
  double forced_ns_ = 0;  // their pauses, as the forcing thread saw them
};

}  // namespace
}  // namespace leakcheck

// Agent_OnLoad, and Agent_OnAttach (minivm-attach PID load
// leakcheck=OPTIONS): the same start (common/agent.h); attached, it tracks
// the objects sampled from the attach on.
MINIVM_AGENT_ENTRY_POINTS(leakcheck::Checker)

// After every agent's VMDeath: an output that could not be written fails the
// run (common/output.h), so that scripts notice.
VMTI_EXPORT void Agent_OnUnload(vmtiVM*) { agent::ExitIfOutputFailed(); }
