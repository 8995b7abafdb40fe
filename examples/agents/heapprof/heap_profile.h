// heapprof's data: sample records aggregated per (stack, class, thread), and
// the outputs built from them (pprof, collapsed stacks, the exit summary).
//
// Estimation (docs/sampling.md, docs/tools.md): a sample of size s and
// Horvitz-Thompson weight w stands for w bytes and w/s objects. Go's heap
// profile scales each (stack, size) bucket by 1/(1-exp(-size/rate)); here a
// bucket mixes sizes, so each sample is unbiased on its own, the doubles are
// summed per aggregate, and only the aggregate is rounded when written.
// In-use values are the same sums over samples whose objects have not been
// reported dead (ObjectFree): a live estimate as of the last collection.
#ifndef MINIVM_EXAMPLES_AGENTS_HEAPPROF_HEAP_PROFILE_H_
#define MINIVM_EXAMPLES_AGENTS_HEAPPROF_HEAP_PROFILE_H_

#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "../common/sites.h"

namespace heapprof {

struct SiteKey {
  uint32_t stack;   // SiteTable stack id
  uint32_t klass;   // SiteTable string id
  uint32_t thread;  // SiteTable string id
  bool operator==(const SiteKey& o) const {
    return stack == o.stack && klass == o.klass && thread == o.thread;
  }
};

struct Totals {
  double alloc_objects = 0, alloc_bytes = 0;
  double inuse_objects = 0, inuse_bytes = 0;
  int64_t samples = 0, live_samples = 0;
  // Samples reported promoted to the old generation (ObjectPromote), dead
  // or alive since; heapprof does not ask for promotions, minivm-collector
  // does (docs/collector.md).
  double promoted_bytes = 0;
  int64_t promoted_samples = 0;
};

struct Row {
  SiteKey key;
  Totals totals;
};

// An estimate as a count for output: rounded, and 0 for anything below (an
// in-use sum may carry a rounding residue below 0).
inline int64_t RoundCount(double v) { return v <= 0 ? 0 : std::llround(v); }

// Thread-safe. Memory: one Totals per distinct key, one 24-byte record per
// sample whose object is alive.
class HeapData {
 public:
  // tag 0: the object could not be tagged; it counts as allocated, not in use.
  // `born`: the number of collections finished before the allocation (see
  // CopyLiveAsOf). Returns the estimated bytes allocated so far (all samples).
  double RecordAlloc(int64_t tag, const SiteKey& key, double weight, int64_t size,
                     uint64_t born = 0);
  void RecordFree(int64_t tag);
  // Counts a live tagged sample as promoted (at most once per tag).
  void RecordPromote(int64_t tag);
  void Copy(std::vector<Row>* rows) const;
  // The same, with in-use values as collection number `collection` (1 for
  // the first) found them: samples born after it (born >= collection) are
  // left out of in-use, since no collection has judged them yet. So a
  // profile taken after a forced collection is exact however long the
  // program kept allocating between that collection and the copy.
  void CopyLiveAsOf(std::vector<Row>* rows, uint64_t collection) const;
  double allocated_bytes() const;
  // The estimated bytes of the samples not reported dead.
  double inuse_bytes() const;

 private:
  struct KeyHash {
    size_t operator()(const SiteKey& k) const {
      return (static_cast<size_t>(k.stack) * 1000003u) ^ (static_cast<size_t>(k.klass) << 20) ^
             k.thread;
    }
  };
  struct LiveRecord {
    uint32_t row;
    double bytes;
    double objects;
    bool promoted;
    uint64_t born;
  };
  mutable std::mutex mu_;
  std::unordered_map<SiteKey, uint32_t, KeyHash> index_;
  std::vector<Row> rows_;
  std::unordered_map<int64_t, LiveRecord> live_;
  double allocated_bytes_ = 0;
  double inuse_bytes_ = 0;
};

enum class ProfileKind { kHeap, kAllocs };

// A gzipped pprof profile of `rows`: Go's four sample types, unbiased values,
// string labels class and thread, default sample type inuse_space (kHeap)
// or alloc_space (kAllocs); the numeric label promoted_bytes on rows with
// promoted samples; `comments` as the profile's comments (`go tool pprof
// -comments`); `main_binary` names the main mapping (pprof's "File:").
// Empty on failure.
std::string BuildPprof(const std::vector<Row>& rows, const agent::SiteTable::Snapshot& sites,
                       int64_t interval, ProfileKind kind,
                       const std::vector<std::string>& comments = {},
                       const std::string& main_binary = "minivm");

// The difference `now` minus `base` of two copies of the same HeapData, per
// key, every field subtracted (a delta profile: Go's net/http/pprof
// ?seconds=N). Rows only in `now` are kept as they are.
std::vector<Row> SubtractRows(const std::vector<Row>& now, const std::vector<Row>& base);

// The wall-clock window of a delta profile (agent::WallNanos values).
struct DeltaWindow {
  int64_t start_nanos = 0;
  int64_t end_nanos = 0;
};

// BuildPprof for rows from SubtractRows: values may be negative (in-use
// space freed during the window), rows whose four values round to 0 are left
// out (as pprof's Merge does for Go's delta profiles), and the profile's
// time and duration are the window's.
std::string BuildDeltaPprof(const std::vector<Row>& delta, const agent::SiteTable::Snapshot& sites,
                            int64_t interval, ProfileKind kind, const DeltaWindow& window,
                            const std::vector<std::string>& comments = {},
                            const std::string& main_binary = "minivm");

// Collapsed stacks, root first, "outer;...;inner;[Class] bytes" per line,
// weights rounded per line; lines with a zero weight are left out.
std::string BuildCollapsed(const std::vector<Row>& rows, const agent::SiteTable::Snapshot& sites,
                           bool inuse);

// The human summary printed at VM death: top `n` allocation sites (frame 0)
// by live bytes and by allocated bytes. `live_when` completes "N MiB live
// ..." with when liveness was last known ("after a full collection at exit").
std::string BuildSummary(const std::vector<Row>& rows, const agent::SiteTable::Snapshot& sites,
                         int64_t interval, int n, const std::string& live_when);

}  // namespace heapprof

#endif  // MINIVM_EXAMPLES_AGENTS_HEAPPROF_HEAP_PROFILE_H_
