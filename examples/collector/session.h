// One VM's profile inside minivm-collector: the parser of the records its
// remote agent writes (protocol.h) and the bookkeeping they feed.
//
// Design:
// .validate-first  Records are validated completely before anything is changed: exact
//     sizes, counts and lengths within protocol.h's limits, finite weights,
//     bounded tables. A malformed record is an error the caller turns into
//     the end of the connection; the session stays as it was, so the
//     profile written after the error holds everything valid before it.
// .stacks  Stacks arrive as (method id, location) pairs and are interned as they
//     come: frames per pair, stacks per frame sequence, so a sample costs a
//     32-bit stack id; names and lines (kMethod, kLine, kClass, kThread) are
//     looked up only when a profile is built. The agent sends each name
//     before the first record that uses it, but a session never relies on
//     that: an id without a name prints as "<unknown method 0x...>".
// .aggregation  Aggregation is heapprof's (examples/agents/heapprof/heap_profile.h:
//     per (stack, class, thread), Horvitz-Thompson weights summed in
//     doubles), and so is the profile writer; promotions are counted per
//     row (the promoted_bytes label).
// .memory  Memory grows with the program's code (frames, stacks, names; each
//     table is capped at kMaxTableEntries, beyond which records are
//     malformed) and with the number of live samples, as heapprof's does.
//
// Not thread-safe: one collector thread owns a session.
#ifndef MINIVM_EXAMPLES_COLLECTOR_SESSION_H_
#define MINIVM_EXAMPLES_COLLECTOR_SESSION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "../agents/common/frame_key.h"
#include "../agents/heapprof/heap_profile.h"

namespace collector {

struct SessionStats {
  uint64_t records = 0;   // applied
  uint64_t samples = 0;   // kAlloc
  uint64_t frees = 0;     // kFree
  uint64_t promotes = 0;  // kPromote
};

class Session {
 public:
  static constexpr size_t kMaxTableEntries = size_t{1} << 20;

  explicit Session(int64_t interval) : interval_(interval) {}

  // Parses and applies one record (its payload, after the ring header).
  // False, with a one-line *error, if it is malformed (nothing applied).
  bool Apply(uint16_t type, const uint8_t* payload, size_t bytes, std::string* error);

  // A gzipped pprof heap profile of everything applied so far, with the
  // given comments; empty if encoding failed.
  std::string BuildProfile(const std::vector<std::string>& comments) const;

  const SessionStats& stats() const { return stats_; }
  int64_t interval() const { return interval_; }

 private:
  using FrameKey = agent::FrameKey<uint64_t>;
  struct MethodNames {
    std::string name, file;
  };

  bool ApplyAlloc(const uint8_t* p, size_t bytes, std::string* error);
  uint32_t Symbol(bool is_class, uint64_t id);
  bool Full(size_t table_size, const char* what, std::string* error) const;

  int64_t interval_;
  SessionStats stats_;
  heapprof::HeapData data_;
  // Entry 0 of frames_, stacks_ and symbols_ is "<unknown>": it stands for
  // an empty stack, and heapprof's writer falls back to it.
  std::vector<FrameKey> frames_{FrameKey{0, 0}};
  std::unordered_map<FrameKey, uint32_t, FrameKey::Hash> frame_index_;
  std::vector<std::vector<uint32_t>> stacks_{std::vector<uint32_t>{0}};
  std::unordered_map<std::string, uint32_t> stack_index_;  // raw frame ids
  struct SymbolKey {
    bool is_class;
    uint64_t id;
  };
  std::vector<SymbolKey> symbols_{SymbolKey{false, 0}};
  std::unordered_map<uint64_t, uint32_t> class_symbols_, thread_symbols_;
  std::unordered_map<uint64_t, MethodNames> methods_;
  std::unordered_map<FrameKey, int32_t, FrameKey::Hash> lines_;
  std::unordered_map<uint64_t, std::string> class_names_;
  std::unordered_map<uint64_t, std::string> thread_names_;
  std::vector<uint32_t> scratch_frames_;  // ApplyAlloc's buffers, reused
  std::string scratch_key_;
};

// `s` with control characters, and bytes that are not valid UTF-8, replaced
// by '?' (profile strings must be UTF-8; a client may send anything).
std::string SanitizeName(const std::string& s);

}  // namespace collector

#endif  // MINIVM_EXAMPLES_COLLECTOR_SESSION_H_
