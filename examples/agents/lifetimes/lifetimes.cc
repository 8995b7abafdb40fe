/*
 * lifetimes: per-site object lifetime distributions (OCaml statmemprof /
 * memtrace style), from SampledObjectAlloc, ObjectPromote and ObjectFree.
 *
 *   minivm -agentlib:lifetimes prog.mv
 *   minivm -agentlib:lifetimes=trace=trace.jsonl,interval=64k prog.mv
 *
 * Options:
 *   interval=BYTES  sampling interval (default 256k)
 *   trace=PATH      write one JSON line per event (alloc, promote, free)
 *   file=PATH       write the report there instead of stderr
 *   top=N           sites in the report (default 10)
 *   depth=N         frames captured (default 8; the site is frame 0)
 *
 * Instances. Each Agent_OnLoad makes its own Tracker, environment and
 * outputs (common/agent.h), so `-agentlib:lifetimes=file=a
 * -agentlib:lifetimes=file=b` is two independent tools.
 *
 * Outputs. Both paths are checked when the agent loads (a bad one stops
 * the VM with exit code 1 before the program runs). The trace is a stream:
 * opened at load in place and written as events arrive; the report is
 * written at VM death in one piece (common/output.h: temp file and rename
 * for a regular file). A write error is reported on stderr in one line at
 * VM death, a report that could not be written follows on stderr instead,
 * and the run then exits with status 1 (Agent_OnUnload, common/output.h).
 *
 * Clocks. Lifetimes are measured in bytes allocated since birth (memtrace's
 * clock, independent of timing noise): the agent keeps the VM-wide estimate
 * t_bytes = the sum of the Horvitz-Thompson weights of all samples so far
 * (every thread's). An alloc event carries t_bytes before the object; a
 * promote or free event carries t_bytes when it was delivered, i.e. just
 * after the collection that found it, so lifetimes are upper bounds by at
 * most the allocation since the previous collection. Lifetimes are also
 * counted in collections survived: GarbageCollectionFinish bumps a counter
 * (raw bookkeeping only); an object freed by collection c, born when c0
 * collections had finished, survived c - c0 - 1.
 *
 * Estimates are weighted: each sample stands for weight/size objects, so
 * fractions ("promoted", "died young") and quantiles are of objects, not of
 * samples. An object dies young if it is freed without being promoted and
 * was allocated young; objects alive at VM death are reported as such
 * (censored, not counted in the lifetime quantiles).
 *
 * Trace format (one JSON object per line):
 *   {"ev":"alloc","id":7,"t_bytes":1048576,"size":32,"class":"Node",
 *    "site":"make tree.mv:4","thread":"main","gen":"young","weight":524304.0}
 *   {"ev":"promote","id":7,"t_bytes":2097152,"gc":3}
 *   {"ev":"free","id":7,"t_bytes":4194304,"gc":5}
 * ids are the agent's tags; the last line is {"ev":"end","t_bytes":..,"gc":..}.
 * Lines are made with nlohmann::json, so every name is escaped as JSON
 * requires; names are bytes a program chose (file names), and bytes that
 * are not valid UTF-8 are written as U+FFFD (error_handler_t::replace)
 * rather than failing the event.
 */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../common/agent.h"
#include "../common/errors.h"
#include "../common/options.h"
#include "../common/output.h"
#include "../common/sites.h"
#include "vmti/vmti.h"

namespace lifetimes {
namespace {

constexpr int kSubBins = 4;  // log2 histogram resolution: 4 bins per doubling
constexpr int kBins = 64 * kSubBins;
constexpr int kGcBins = 64;  // collections survived, capped

struct Config {
  int64_t interval = 256 * 1024;
  std::string trace;
  std::string file;
  int64_t top = 10;
  int64_t depth = 8;
};

int BinOf(double bytes) {
  if (bytes < 1) return 0;
  int b = static_cast<int>(std::floor(std::log2(bytes) * kSubBins)) + 1;
  return std::min(b, kBins - 1);
}
double BinUpper(int b) { return b == 0 ? 1 : std::exp2(static_cast<double>(b) / kSubBins); }

struct Site {
  Site(uint32_t f, uint32_t k) : frame(f), klass(k) {}
  uint32_t frame, klass;
  double alloc_objects = 0, alloc_bytes = 0;
  double promoted = 0, died_young = 0, died_old = 0;
  int64_t samples = 0;
  std::vector<double> life_bytes = std::vector<double>(kBins, 0.0);  // weighted by objects
  std::vector<double> life_gcs = std::vector<double>(kGcBins, 0.0);
};

struct Record {
  uint32_t site;
  double objects;
  double birth_bytes;
  int64_t birth_gc;
  bool young;
  bool promoted;
};

// ordered_json keeps the keys in the order written ("ev" first), for
// people reading the trace.
using Json = nlohmann::ordered_json;

// One trace line. Never throws for a name's bytes: invalid UTF-8 becomes
// U+FFFD; everything else is escaped as JSON requires.
std::string JsonLine(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

int64_t Round(double v) { return static_cast<int64_t>(std::llround(v)); }

// The q-quantile of a weighted histogram, as the upper edge of its bin.
template <typename F>
double HistQuantile(const std::vector<double>& h, double q, F upper) {
  double total = 0;
  for (double v : h) total += v;
  if (total <= 0) return 0;
  double acc = 0;
  for (size_t i = 0; i < h.size(); i++) {
    acc += h[i];
    if (acc >= q * total) return upper(static_cast<int>(i));
  }
  return upper(static_cast<int>(h.size()) - 1);
}

class Tracker {
 public:
  static constexpr const char* kName = "lifetimes";
  using Config = lifetimes::Config;

  // The instance's side of agent::Start (common/agent.h).
  static void DeclareOptions(Config* c, agent::OptionParser* p) {
    p->Interval(&c->interval);
    agent::DeclareOutputOption(p, "trace", &c->trace);
    agent::DeclareOutputOption(p, "file", &c->file);
    p->Int("top", &c->top, 1, 100000, "a site count");
    p->Depth(&c->depth);
  }

  // Opens the trace (both paths were checked as they were parsed); null
  // after one line on stderr.
  static std::unique_ptr<Tracker> Create(Config c, vmtiVM*, vmtiEnv*) {
    if (!c.trace.empty() && c.trace == c.file) {
      agent::BadOption(kName, "file", c.file, "the same file as trace=");
      return nullptr;
    }
    auto tracker = std::make_unique<Tracker>(std::move(c));
    std::string error;
    if (tracker->tracing() && !tracker->trace_.Open(tracker->config_.trace, &error)) {
      agent::BadOption(kName, "trace", tracker->config_.trace, error);
      return nullptr;
    }
    return tracker;
  }

  explicit Tracker(Config c) : config_(std::move(c)), log_(kName) {}

  // Handlers: OnSample, OnObjectFree, OnObjectPromote, OnGcFinish, OnVMDeath
  // (common/agent.h).
  void Configure(agent::Setup* setup) const { setup->interval = config_.interval; }

  agent::ErrorLog& log() { return log_; }

  void OnSample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                vmtiLong size) {
    if (dead_.load(std::memory_order_acquire)) return;
    agent::Sample sample;
    if (!sites_.Capture(env, object, klass, config_.depth, &next_tag_, &log_, &sample)) return;
    const vmtiSampleInfo& info = sample.info;
    const uint32_t frame = sites_.LeafFrame(sample.stack);
    const uint32_t cls = sample.klass;
    const uint32_t thr = tracing() ? sites_.ThreadName(env, thread, &log_) : 0;
    const int64_t tag = sample.tag;  // 0: untagged, never freed or promoted
    double objects = size > 0 ? info.weight / static_cast<double>(size) : 0;
    bool young = info.generation != VMTI_GENERATION_OLD;
    std::lock_guard<std::mutex> g(mu_);
    bool added = false;
    const uint32_t s = site_ids_.Get(frame, cls, &added);
    if (added) sites_v_.emplace_back(frame, cls);
    Site& site = sites_v_[s];
    site.alloc_objects += objects;
    site.alloc_bytes += info.weight;
    site.samples++;
    double birth = t_bytes_;
    int64_t gc = gc_count_.load(std::memory_order_relaxed);
    if (tag != 0) live_.emplace(tag, Record{s, objects, birth, gc, young, false});
    t_bytes_ += info.weight;
    if (tracing()) {
      Json j;
      j["ev"] = "alloc";
      j["id"] = tag;
      j["t_bytes"] = Round(birth);
      j["size"] = static_cast<int64_t>(size);
      j["class"] = sites_.GetString(cls);
      j["site"] = agent::FrameLabel(sites_.GetFrame(frame));
      j["thread"] = sites_.GetString(thr);
      j["gen"] = young ? "young" : "old";
      j["weight"] = std::round(info.weight * 10) / 10;  // a tenth of a byte is plenty
      j["gc"] = gc;
      trace_.Write(JsonLine(j));
    }
  }

  void OnObjectPromote(vmtiEnv*, vmtiLong tag) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(tag);
    if (it == live_.end() || it->second.promoted) return;
    it->second.promoted = true;
    sites_v_[it->second.site].promoted += it->second.objects;
    if (tracing()) {
      trace_.Write(JsonLine(Json{{"ev", "promote"},
                                 {"id", tag},
                                 {"t_bytes", Round(t_bytes_)},
                                 {"gc", gc_count_.load(std::memory_order_relaxed)}}));
    }
  }

  void OnObjectFree(vmtiEnv*, vmtiLong tag) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(tag);
    if (it == live_.end()) return;
    const Record& r = it->second;
    Site& site = sites_v_[r.site];
    int64_t gc = gc_count_.load(std::memory_order_relaxed);
    if (r.young && !r.promoted)
      site.died_young += r.objects;
    else
      site.died_old += r.objects;
    site.life_bytes[BinOf(t_bytes_ - r.birth_bytes)] += r.objects;
    int64_t survived = std::max<int64_t>(0, gc - r.birth_gc - 1);
    site.life_gcs[std::min<int64_t>(survived, kGcBins - 1)] += r.objects;
    if (tracing()) {
      trace_.Write(
          JsonLine(Json{{"ev", "free"}, {"id", tag}, {"t_bytes", Round(t_bytes_)}, {"gc", gc}}));
    }
    live_.erase(it);
  }

  // Inside the pause: raw bookkeeping only.
  void OnGcFinish(vmtiEnv*) { gc_count_.fetch_add(1, std::memory_order_relaxed); }

  void OnVMDeath(vmtiEnv*) {
    dead_.store(true, std::memory_order_release);
    std::string report;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (tracing()) {
        trace_.Write(JsonLine(Json{{"ev", "end"},
                                   {"t_bytes", Round(t_bytes_)},
                                   {"gc", gc_count_.load(std::memory_order_relaxed)}}));
        std::string error;
        if (!trace_.Close(&error)) {
          std::fprintf(stderr, "%s: %s; the trace is incomplete\n", kName, error.c_str());
          agent::NoteOutputFailed();
        }
      }
      report = ReportLocked();
    }
    agent::EmitReport(kName, config_.file, report);
  }

 private:
  // Fixed at load (the stream itself is only touched under mu_).
  bool tracing() const { return !config_.trace.empty(); }

  std::string ReportLocked() {
    std::vector<double> alive(sites_v_.size(), 0.0);
    for (const auto& kv : live_) alive[kv.second.site] += kv.second.objects;
    std::vector<size_t> order(sites_v_.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::sort(order.begin(), order.end(), [this](size_t a, size_t b) {
      return sites_v_[a].alloc_bytes > sites_v_[b].alloc_bytes;
    });
    std::string out;
    char line[1024];
    int64_t samples = 0;
    for (const Site& s : sites_v_) samples += s.samples;
    std::snprintf(line, sizeof line,
                  "lifetimes: %lld samples, est. %s allocated, %lld collections; lifetimes in "
                  "bytes allocated since birth (quantiles of objects, freed ones only; - where "
                  "none was freed)\n",
                  static_cast<long long>(samples), agent::HumanBytes(t_bytes_).c_str(),
                  static_cast<long long>(gc_count_.load()));
    out += line;
    std::snprintf(line, sizeof line, "lifetimes: %10s %10s %7s %7s %7s %10s %10s %6s  %s\n",
                  "alloc", "objects", "young%", "promo%", "alive%", "life p50", "life p90",
                  "gc p50", "site");
    out += line;
    int shown = 0;
    for (size_t i : order) {
      if (shown++ >= config_.top) break;
      const Site& s = sites_v_[i];
      double n = s.alloc_objects > 0 ? s.alloc_objects : 1;
      // No freed sample: no lifetime was seen, which is not "dies at once".
      const bool freed = s.died_young + s.died_old > 0;
      auto upper_gc = [](int b) { return static_cast<double>(b); };
      std::string p50 = "-", p90 = "-", gc50 = "-";
      if (freed) {
        p50 = agent::HumanBytes(HistQuantile(s.life_bytes, 0.5, BinUpper));
        p90 = agent::HumanBytes(HistQuantile(s.life_bytes, 0.9, BinUpper));
        gc50 = std::to_string(static_cast<long long>(HistQuantile(s.life_gcs, 0.5, upper_gc)));
      }
      std::snprintf(line, sizeof line,
                    "lifetimes: %10s %10.0f %6.1f%% %6.1f%% %6.1f%% %10s %10s %6s  %s [%s]\n",
                    agent::HumanBytes(s.alloc_bytes).c_str(), s.alloc_objects,
                    100 * s.died_young / n, 100 * s.promoted / n, 100 * alive[i] / n, p50.c_str(),
                    p90.c_str(), gc50.c_str(), agent::FrameLabel(sites_.GetFrame(s.frame)).c_str(),
                    sites_.GetString(s.klass).c_str());
      out += line;
    }
    return out;
  }

  const Config config_;
  agent::ErrorLog log_;
  agent::SiteTable sites_;
  std::atomic<int64_t> next_tag_{1};
  std::atomic<int64_t> gc_count_{0};
  std::atomic<bool> dead_{false};
  std::mutex mu_;              // guards everything below
  agent::OutputStream trace_;  // opened before any event; closed at VM death
  agent::SiteIds site_ids_;
  std::vector<Site> sites_v_;  // indexed by site_ids_
  std::unordered_map<int64_t, Record> live_;
  double t_bytes_ = 0;
};

}  // namespace
}  // namespace lifetimes

// Agent_OnLoad, and Agent_OnAttach (minivm-attach PID load
// lifetimes=OPTIONS): the same start (common/agent.h); attached, its trace
// and report cover the objects sampled from the attach on.
MINIVM_AGENT_ENTRY_POINTS(lifetimes::Tracker)

// After every agent's VMDeath: an output that could not be written fails the
// run (common/output.h), so that scripts notice.
VMTI_EXPORT void Agent_OnUnload(vmtiVM*) { agent::ExitIfOutputFailed(); }
