#include "heap_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "../common/output.h"
#include "../common/pprof.h"

namespace heapprof {

double HeapData::RecordAlloc(int64_t tag, const SiteKey& key, double weight, int64_t size,
                             uint64_t born) {
  double objects = size > 0 ? weight / static_cast<double>(size) : 0.0;
  std::lock_guard<std::mutex> g(mu_);
  auto it = index_.find(key);
  uint32_t row;
  if (it == index_.end()) {
    row = static_cast<uint32_t>(rows_.size());
    rows_.push_back(Row{key, Totals()});
    index_.emplace(key, row);
  } else {
    row = it->second;
  }
  Totals& t = rows_[row].totals;
  t.samples++;
  t.alloc_bytes += weight;
  t.alloc_objects += objects;
  if (tag != 0 && live_.emplace(tag, LiveRecord{row, weight, objects, false, born}).second) {
    t.live_samples++;
    t.inuse_bytes += weight;
    t.inuse_objects += objects;
    inuse_bytes_ += weight;
  }
  allocated_bytes_ += weight;
  return allocated_bytes_;
}

void HeapData::RecordFree(int64_t tag) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = live_.find(tag);
  if (it == live_.end()) return;  // not ours, or already freed
  Totals& t = rows_[it->second.row].totals;
  inuse_bytes_ = live_.size() == 1 ? 0 : inuse_bytes_ - it->second.bytes;
  if (--t.live_samples == 0) {
    // Exactly zero, not the rounding residue of the subtractions.
    t.inuse_bytes = 0;
    t.inuse_objects = 0;
  } else {
    t.inuse_bytes -= it->second.bytes;
    t.inuse_objects -= it->second.objects;
  }
  live_.erase(it);
}

void HeapData::RecordPromote(int64_t tag) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = live_.find(tag);
  if (it == live_.end() || it->second.promoted) return;  // not ours, dead, or counted
  it->second.promoted = true;
  Totals& t = rows_[it->second.row].totals;
  t.promoted_samples++;
  t.promoted_bytes += it->second.bytes;
}

void HeapData::Copy(std::vector<Row>* rows) const {
  std::lock_guard<std::mutex> g(mu_);
  *rows = rows_;
}

void HeapData::CopyLiveAsOf(std::vector<Row>* rows, uint64_t collection) const {
  std::lock_guard<std::mutex> g(mu_);
  *rows = rows_;
  for (const auto& [tag, rec] : live_) {
    if (rec.born < collection) continue;
    Totals& t = (*rows)[rec.row].totals;
    if (--t.live_samples == 0) {
      t.inuse_bytes = 0;  // exactly, as in RecordFree
      t.inuse_objects = 0;
    } else {
      t.inuse_bytes -= rec.bytes;
      t.inuse_objects -= rec.objects;
    }
  }
}

double HeapData::allocated_bytes() const {
  std::lock_guard<std::mutex> g(mu_);
  return allocated_bytes_;
}

double HeapData::inuse_bytes() const {
  std::lock_guard<std::mutex> g(mu_);
  return inuse_bytes_;
}

namespace {

struct SiteKeyHash {
  size_t operator()(const SiteKey& k) const {
    return (static_cast<size_t>(k.stack) * 1000003u) ^ (static_cast<size_t>(k.klass) << 20) ^
           k.thread;
  }
};

// The encoder behind BuildPprof and BuildDeltaPprof. Cumulative profiles
// clamp values at 0 (in-use sums may carry a rounding residue below 0) and
// leave out rows that never allocated; a delta keeps negative values (space
// freed in the window) and leaves out only rows whose four values are 0.
std::string EncodePprof(const std::vector<Row>& rows, const agent::SiteTable::Snapshot& sites,
                        int64_t interval, ProfileKind kind,
                        const std::vector<std::string>& comments, const std::string& main_binary,
                        const DeltaWindow* delta) {
  pprof::ProfileBuilder b;
  b.AddSampleType("alloc_objects", "count");
  b.AddSampleType("alloc_space", "bytes");
  b.AddSampleType("inuse_objects", "count");
  b.AddSampleType("inuse_space", "bytes");
  b.SetPeriod("space", "bytes", interval);
  b.SetDefaultSampleType(kind == ProfileKind::kHeap ? "inuse_space" : "alloc_space");
  if (delta != nullptr) {
    b.SetTimeNanos(delta->end_nanos);
    b.SetDurationNanos(delta->end_nanos - delta->start_nanos);
  } else {
    b.SetTimeNanos(agent::WallNanos());
  }
  b.SetMainBinary(main_binary);
  for (const std::string& c : comments) b.AddComment(c);
  auto round = [delta](double v) -> int64_t {
    return delta != nullptr ? std::llround(v) : RoundCount(v);
  };
  std::vector<uint64_t> locs;
  std::vector<pprof::Label> labels(3);
  labels[0].key = "class";
  labels[1].key = "thread";
  labels[2].key = "bytes";  // average object size, as Go's heap profile
  labels[2].is_num = true;  // no num_unit: pprof infers bytes from the key, as for Go's
  for (const Row& r : rows) {
    const Totals& t = r.totals;
    std::vector<int64_t> values = {round(t.alloc_objects), round(t.alloc_bytes),
                                   round(t.inuse_objects), round(t.inuse_bytes)};
    if (delta != nullptr ? values[0] == 0 && values[1] == 0 && values[2] == 0 && values[3] == 0
                         : values[0] == 0 && values[1] == 0) {
      continue;
    }
    locs.clear();
    for (uint32_t f : sites.stack(r.key.stack)) {
      const agent::Frame& fr = sites.frame(f);
      locs.push_back(b.Location(fr.function, fr.file, fr.line));
    }
    labels[0].str = sites.string(r.key.klass);
    labels[1].str = sites.string(r.key.thread);
    // In a delta without allocations the objects freed give the size.
    double objects = t.alloc_objects > 0 ? t.alloc_objects : std::fabs(t.inuse_objects);
    double bytes = t.alloc_objects > 0 ? t.alloc_bytes : std::fabs(t.inuse_bytes);
    labels[2].num = objects > 0 ? RoundCount(bytes / objects) : 0;
    if (t.promoted_samples > 0) {
      std::vector<pprof::Label> with_promoted = labels;
      pprof::Label p;
      p.key = "promoted_bytes";  // like "bytes": pprof infers the unit from the key
      p.is_num = true;
      p.num = RoundCount(t.promoted_bytes);
      with_promoted.push_back(p);
      b.AddSample(locs, values, with_promoted);
    } else {
      b.AddSample(locs, values, labels);
    }
  }
  std::string gz;
  if (!pprof::Gzip(b.Encode(), &gz)) return std::string();
  return gz;
}

}  // namespace

std::string BuildPprof(const std::vector<Row>& rows, const agent::SiteTable::Snapshot& sites,
                       int64_t interval, ProfileKind kind,
                       const std::vector<std::string>& comments, const std::string& main_binary) {
  return EncodePprof(rows, sites, interval, kind, comments, main_binary, nullptr);
}

std::vector<Row> SubtractRows(const std::vector<Row>& now, const std::vector<Row>& base) {
  std::unordered_map<SiteKey, const Totals*, SiteKeyHash> before;
  for (const Row& r : base) before.emplace(r.key, &r.totals);
  std::vector<Row> out;
  out.reserve(now.size());
  for (const Row& r : now) {
    Row d = r;
    auto it = before.find(r.key);
    if (it != before.end()) {
      const Totals& b = *it->second;
      Totals& t = d.totals;
      t.alloc_objects -= b.alloc_objects;
      t.alloc_bytes -= b.alloc_bytes;
      t.inuse_objects -= b.inuse_objects;
      t.inuse_bytes -= b.inuse_bytes;
      t.samples -= b.samples;
      t.live_samples -= b.live_samples;
      t.promoted_bytes -= b.promoted_bytes;
      t.promoted_samples -= b.promoted_samples;
      before.erase(it);
    }
    out.push_back(d);
  }
  // Rows are never removed from HeapData; a key only in `base` is kept
  // (negated) all the same, so that the difference is exact for any input.
  for (const Row& r : base) {
    if (before.count(r.key) == 0) continue;
    Row d{r.key, Totals()};
    d.totals.alloc_objects = -r.totals.alloc_objects;
    d.totals.alloc_bytes = -r.totals.alloc_bytes;
    d.totals.inuse_objects = -r.totals.inuse_objects;
    d.totals.inuse_bytes = -r.totals.inuse_bytes;
    d.totals.samples = -r.totals.samples;
    d.totals.live_samples = -r.totals.live_samples;
    out.push_back(d);
  }
  return out;
}

std::string BuildDeltaPprof(const std::vector<Row>& delta, const agent::SiteTable::Snapshot& sites,
                            int64_t interval, ProfileKind kind, const DeltaWindow& window,
                            const std::vector<std::string>& comments,
                            const std::string& main_binary) {
  return EncodePprof(delta, sites, interval, kind, comments, main_binary, &window);
}

std::string BuildCollapsed(const std::vector<Row>& rows, const agent::SiteTable::Snapshot& sites,
                           bool inuse) {
  // Rows differing only by thread share a line.
  std::map<std::string, double> lines;
  for (const Row& r : rows) {
    double v = inuse ? r.totals.inuse_bytes : r.totals.alloc_bytes;
    if (v <= 0) continue;
    const std::vector<uint32_t>& st = sites.stack(r.key.stack);
    std::string line;
    for (size_t i = st.size(); i-- > 0;) {
      const agent::Frame& f = sites.frame(st[i]);
      line += f.function;
      if (f.line > 0) line += ":" + std::to_string(f.line);
      line += ';';
    }
    line += "[" + sites.string(r.key.klass) + "]";
    for (char& c : line) {
      if (c == ' ') c = '_';  // the weight is the last space-separated field
    }
    lines[line] += v;
  }
  std::string out;
  for (const auto& kv : lines) {
    int64_t v = RoundCount(kv.second);
    if (v > 0) out += kv.first + " " + std::to_string(v) + "\n";
  }
  return out;
}

std::string BuildSummary(const std::vector<Row>& rows, const agent::SiteTable::Snapshot& sites,
                         int64_t interval, int n, const std::string& live_when) {
  struct Site {
    uint32_t frame;
    double live_bytes = 0, live_objects = 0, alloc_bytes = 0, alloc_objects = 0;
  };
  std::map<uint32_t, Site> by_frame;
  double total_alloc = 0, total_live = 0;
  int64_t samples = 0;
  for (const Row& r : rows) {
    uint32_t leaf = sites.stack(r.key.stack)[0];
    Site& s = by_frame[leaf];
    s.frame = leaf;
    s.live_bytes += r.totals.inuse_bytes;
    s.live_objects += r.totals.inuse_objects;
    s.alloc_bytes += r.totals.alloc_bytes;
    s.alloc_objects += r.totals.alloc_objects;
    total_alloc += r.totals.alloc_bytes;
    total_live += r.totals.inuse_bytes;
    samples += r.totals.samples;
  }
  std::vector<Site> v;
  for (auto& kv : by_frame) v.push_back(kv.second);
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line,
                "heapprof: %lld samples at interval %lld B: est. %s allocated, %s live %s\n",
                static_cast<long long>(samples), static_cast<long long>(interval),
                agent::HumanBytes(total_alloc).c_str(), agent::HumanBytes(total_live).c_str(),
                live_when.c_str());
  out += line;
  for (int pass = 0; pass < 2; pass++) {
    bool live = pass == 0;
    std::stable_sort(v.begin(), v.end(), [live](const Site& a, const Site& b) {
      return live ? a.live_bytes > b.live_bytes : a.alloc_bytes > b.alloc_bytes;
    });
    out +=
        live ? "heapprof: top sites by live bytes:\n" : "heapprof: top sites by allocated bytes:\n";
    std::snprintf(line, sizeof line, "heapprof:   %12s %12s  %s\n",
                  live ? "live bytes" : "alloc bytes", live ? "live objects" : "alloc objs",
                  "site");
    out += line;
    int shown = 0;
    for (const Site& s : v) {
      double bytes = live ? s.live_bytes : s.alloc_bytes;
      double objects = live ? s.live_objects : s.alloc_objects;
      if (shown >= n || bytes < 0.5) break;
      std::snprintf(line, sizeof line, "heapprof:   %12s %12lld  %s\n",
                    agent::HumanBytes(bytes).c_str(), static_cast<long long>(RoundCount(objects)),
                    agent::FrameLabel(sites.frame(s.frame)).c_str());
      out += line;
      shown++;
    }
    if (shown == 0) out += "heapprof:   (none)\n";
  }
  return out;
}

}  // namespace heapprof
