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
 */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
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

namespace lifetimes {
namespace {

constexpr const char* kName = "lifetimes";
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

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

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
  explicit Tracker(Config c) : config_(std::move(c)), log_(kName) {}
  agent::ErrorLog& log() { return log_; }

  bool Open() {
    if (!config_.trace.empty()) {
      trace_ = std::fopen(config_.trace.c_str(), "w");
      if (trace_ == nullptr) {
        std::fprintf(stderr, "lifetimes: bad option 'trace=%s': %s\n", config_.trace.c_str(),
                     std::strerror(errno));
        return false;
      }
      setvbuf(trace_, nullptr, _IOFBF, 1 << 16);
    }
    if (!config_.file.empty()) {
      report_ = std::fopen(config_.file.c_str(), "w");
      if (report_ == nullptr) {
        std::fprintf(stderr, "lifetimes: bad option 'file=%s': %s\n", config_.file.c_str(),
                     std::strerror(errno));
        return false;
      }
    } else {
      report_ = stderr;
    }
    return true;
  }

  void OnSample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                vmtiLong size) {
    if (dead_.load(std::memory_order_acquire)) return;
    vmtiSampleInfo info;
    if (!log_.Check(env, (*env)->GetSampleInfo(env, &info), "GetSampleInfo")) return;
    uint32_t stack = sites_.CaptureStack(env, static_cast<int>(config_.depth), &log_);
    uint32_t frame = sites_.LeafFrame(stack);
    uint32_t cls = sites_.ClassName(env, klass, &log_);
    uint32_t thr = trace_ ? sites_.ThreadName(env, thread, &log_) : 0;
    int64_t tag = next_tag_.fetch_add(1, std::memory_order_relaxed);
    bool tagged = log_.Check(env, (*env)->SetTag(env, object, tag), "SetTag");
    double objects = size > 0 ? info.weight / static_cast<double>(size) : 0;
    bool young = info.generation != VMTI_GENERATION_OLD;
    std::lock_guard<std::mutex> g(mu_);
    uint32_t s = SiteLocked(frame, cls);
    Site& site = sites_v_[s];
    site.alloc_objects += objects;
    site.alloc_bytes += info.weight;
    site.samples++;
    double birth = t_bytes_;
    int64_t gc = gc_count_.load(std::memory_order_relaxed);
    if (tagged) live_.emplace(tag, Record{s, objects, birth, gc, young, false});
    t_bytes_ += info.weight;
    if (trace_) {
      std::fprintf(trace_,
                   "{\"ev\":\"alloc\",\"id\":%lld,\"t_bytes\":%.0f,\"size\":%lld,\"class\":%s,"
                   "\"site\":%s,\"thread\":%s,\"gen\":\"%s\",\"weight\":%.1f,\"gc\":%lld}\n",
                   static_cast<long long>(tagged ? tag : 0), birth, static_cast<long long>(size),
                   JsonString(sites_.GetString(cls)).c_str(),
                   JsonString(agent::FrameLabel(sites_.GetFrame(frame))).c_str(),
                   JsonString(sites_.GetString(thr)).c_str(), young ? "young" : "old", info.weight,
                   static_cast<long long>(gc));
    }
  }

  void OnPromote(vmtiEnv*, vmtiLong tag) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(tag);
    if (it == live_.end() || it->second.promoted) return;
    it->second.promoted = true;
    sites_v_[it->second.site].promoted += it->second.objects;
    if (trace_) {
      std::fprintf(trace_, "{\"ev\":\"promote\",\"id\":%lld,\"t_bytes\":%.0f,\"gc\":%lld}\n",
                   static_cast<long long>(tag), t_bytes_,
                   static_cast<long long>(gc_count_.load(std::memory_order_relaxed)));
    }
  }

  void OnFree(vmtiEnv*, vmtiLong tag) {
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
    if (trace_) {
      std::fprintf(trace_, "{\"ev\":\"free\",\"id\":%lld,\"t_bytes\":%.0f,\"gc\":%lld}\n",
                   static_cast<long long>(tag), t_bytes_, static_cast<long long>(gc));
    }
    live_.erase(it);
  }

  void OnGcFinish() { gc_count_.fetch_add(1, std::memory_order_relaxed); }

  void OnVMDeath(vmtiEnv*) {
    dead_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> g(mu_);
    if (trace_) {
      std::fprintf(trace_, "{\"ev\":\"end\",\"t_bytes\":%.0f,\"gc\":%lld}\n", t_bytes_,
                   static_cast<long long>(gc_count_.load()));
      std::fclose(trace_);
      trace_ = nullptr;
    }
    std::string r = ReportLocked();
    std::fputs(r.c_str(), report_);
    std::fflush(report_);
    if (report_ != stderr) std::fclose(report_);
    report_ = nullptr;
  }

 private:
  uint32_t SiteLocked(uint32_t frame, uint32_t cls) {
    uint64_t key = static_cast<uint64_t>(frame) << 32 | cls;
    auto it = site_index_.find(key);
    if (it != site_index_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(sites_v_.size());
    Site s;
    s.frame = frame;
    s.klass = cls;
    sites_v_.push_back(std::move(s));
    site_index_.emplace(key, id);
    return id;
  }

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
                  "bytes allocated since birth (quantiles of objects, freed ones only)\n",
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
      auto upper_gc = [](int b) { return static_cast<double>(b); };
      std::snprintf(line, sizeof line,
                    "lifetimes: %10s %10.0f %6.1f%% %6.1f%% %6.1f%% %10s %10s %6.0f  %s [%s]\n",
                    agent::HumanBytes(s.alloc_bytes).c_str(), s.alloc_objects,
                    100 * s.died_young / n, 100 * s.promoted / n, 100 * alive[i] / n,
                    agent::HumanBytes(HistQuantile(s.life_bytes, 0.5, BinUpper)).c_str(),
                    agent::HumanBytes(HistQuantile(s.life_bytes, 0.9, BinUpper)).c_str(),
                    HistQuantile(s.life_gcs, 0.5, upper_gc),
                    agent::FrameLabel(sites_.GetFrame(s.frame)).c_str(),
                    sites_.GetString(s.klass).c_str());
      out += line;
    }
    return out;
  }

  Config config_;
  agent::ErrorLog log_;
  agent::SiteTable sites_;
  FILE* trace_ = nullptr;
  FILE* report_ = nullptr;
  std::atomic<int64_t> next_tag_{1};
  std::atomic<int64_t> gc_count_{0};
  std::atomic<bool> dead_{false};
  std::mutex mu_;  // guards everything below, and trace_ writes
  std::unordered_map<uint64_t, uint32_t> site_index_;
  std::vector<Site> sites_v_;
  std::unordered_map<int64_t, Record> live_;
  double t_bytes_ = 0;
};

Tracker* g_tracker = nullptr;

// No C++ exception may unwind into the VM (common/sites.h).
template <typename F>
void Guard(const char* what, F&& f) {
  agent::Guard(kName, what, std::forward<F>(f));
}
void JNI_Sample(vmtiEnv* env, vmtiThread t, vmtiObject o, vmtiClass k, vmtiLong s) {
  Guard("SampledObjectAlloc", [&] { g_tracker->OnSample(env, t, o, k, s); });
}
void JNI_Promote(vmtiEnv* env, vmtiLong tag) {
  Guard("ObjectPromote", [&] { g_tracker->OnPromote(env, tag); });
}
void JNI_Free(vmtiEnv* env, vmtiLong tag) {
  Guard("ObjectFree", [&] { g_tracker->OnFree(env, tag); });
}
void JNI_GcFinish(vmtiEnv*) { g_tracker->OnGcFinish(); }  // cannot throw
void JNI_VMDeath(vmtiEnv* env) {
  Guard("VMDeath", [&] { g_tracker->OnVMDeath(env); });
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
    } else if (k == "trace") {
      if (v.empty()) return agent::BadOption(kName, k, v, "want a file path");
      c->trace = v;
    } else if (k == "file") {
      if (v.empty()) return agent::BadOption(kName, k, v, "want a file path");
      c->file = v;
    } else if (k == "top") {
      if (!agent::ParseInt(v, 1, 100000, &c->top)) {
        return agent::BadOption(kName, k, v, "want a count >= 1");
      }
    } else if (k == "depth") {
      if (!agent::ParseInt(v, 1, 4096, &c->depth)) {
        return agent::BadOption(kName, k, v, "want a frame count from 1 to 4096");
      }
    } else {
      return agent::BadOption(kName, k, v,
                              "unknown option (known: interval, trace, file, top, depth)");
    }
  }
  return 0;
}

}  // namespace
}  // namespace lifetimes

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  using namespace lifetimes;
  (void)reserved;
  Config config;
  if (ParseConfig(options, &config) != 0) return 1;
  vmtiEnv* env = nullptr;
  if ((*vm)->GetEnv(vm, reinterpret_cast<void**>(&env), VMTI_VERSION_1) != VMTI_ERROR_NONE) {
    std::fprintf(stderr, "lifetimes: GetEnv failed\n");
    return 1;
  }
  auto tracker = std::make_unique<Tracker>(config);
  if (!tracker->Open()) return 1;
  agent::ErrorLog& log = tracker->log();
  vmtiCapabilities caps;
  std::memset(&caps, 0, sizeof caps);
  caps.can_generate_sampled_alloc_events = 1;
  caps.can_tag_objects = 1;
  caps.can_generate_object_free_events = 1;
  caps.can_generate_object_promote_events = 1;
  caps.can_generate_garbage_collection_events = 1;
  if (!log.Check(env, (*env)->AddCapabilities(env, &caps), "AddCapabilities")) return 1;
  vmtiEventCallbacks cb;
  std::memset(&cb, 0, sizeof cb);
  cb.VMDeath = &JNI_VMDeath;
  cb.SampledObjectAlloc = &JNI_Sample;
  cb.ObjectFree = &JNI_Free;
  cb.ObjectPromote = &JNI_Promote;
  cb.GarbageCollectionFinish = &JNI_GcFinish;
  if (!log.Check(env, (*env)->SetEventCallbacks(env, &cb, static_cast<vmtiInt>(sizeof cb)),
                 "SetEventCallbacks") ||
      !log.Check(env, (*env)->SetHeapSamplingInterval(env, static_cast<vmtiInt>(config.interval)),
                 "SetHeapSamplingInterval")) {
    return 1;
  }
  for (vmtiEvent e : {VMTI_EVENT_VM_DEATH, VMTI_EVENT_OBJECT_FREE, VMTI_EVENT_OBJECT_PROMOTE,
                      VMTI_EVENT_GARBAGE_COLLECTION_FINISH, VMTI_EVENT_SAMPLED_OBJECT_ALLOC}) {
    if (!log.Check(env, (*env)->SetEventNotificationMode(env, VMTI_ENABLE, e, nullptr),
                   "SetEventNotificationMode")) {
      return 1;
    }
  }
  g_tracker = tracker.release();
  return 0;
}
