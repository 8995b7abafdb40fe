// Stack capture and interning shared by the tool agents.
//
// A sampled allocation's stack is captured on the allocating thread (only
// the current thread's stack can be read) and resolved at once into
// (function, file, line) frames, because method names and line numbers can
// only be asked for from a VM thread, while the agents build their output on
// their own threads (HTTP, dumps). Frames are interned per (method,
// location) and stacks per frame sequence, so a sample record holds one
// 32-bit stack id and the memory of the tables grows with the program's
// code, not with the number of samples.
//
// Thread safety: every public member may be called from any thread. The
// VMTI calls that resolve a new frame run outside the table's lock.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_SITES_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_SITES_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "errors.h"
#include "frame_key.h"
#include "vmti/vmti.h"

namespace agent {

// Copies an Allocate'd string and Deallocates it (NULL gives "").
std::string TakeString(vmtiEnv* env, char* s);

struct Frame {
  std::string function;
  std::string file;
  int line = 0;  // 0: unknown
};

// What the tool agents take of a sampled allocation, in SampledObjectAlloc
// on the allocating thread (SiteTable::Capture).
struct Sample {
  vmtiSampleInfo info{};
  uint32_t stack = 0;  // a SiteTable stack id (0: unknown)
  uint32_t klass = 0;  // the class name's string id (0: unknown)
  int64_t tag = 0;     // set on the object; 0: it could not be
};

class SiteTable {
 public:
  static constexpr uint32_t kUnknown = 0;  // stack id and frame id of "<unknown>"

  SiteTable();

  // Captures up to max_depth frames of the current thread (frame 0 the
  // innermost) and returns the interned stack id (kUnknown on failure).
  uint32_t CaptureStack(vmtiEnv* env, int max_depth, ErrorLog* log);

  // In SampledObjectAlloc: fills *out for `object`, its sample info, its
  // stack (up to max_depth frames) and class name interned here, and a
  // fresh tag from *next_tag, set on the object so that its ObjectFree
  // names it. The object cannot die before the callback returns, so what
  // the caller records under the tag now is in place before that
  // ObjectFree. Returns false (logged) if GetSampleInfo failed: the event
  // is then dropped.
  bool Capture(vmtiEnv* env, vmtiObject object, vmtiClass klass, int64_t max_depth,
               std::atomic<int64_t>* next_tag, ErrorLog* log, Sample* out);

  // The interned name of a class (cached per vmtiClass) and of the current
  // thread (cached per OS thread); ids index strings().
  uint32_t ClassName(vmtiEnv* env, vmtiClass klass, ErrorLog* log);
  uint32_t ThreadName(vmtiEnv* env, vmtiThread thread, ErrorLog* log);
  uint32_t InternString(const std::string& s);

  // Copies of the tables, for building output off the VM's threads. Ids are
  // indexes; entries are never removed.
  struct Snapshot {
    std::vector<Frame> frames;
    std::vector<std::vector<uint32_t>> stacks;  // frame ids, innermost first
    std::vector<std::string> strings;

    // One entry by id; an id out of range gives entry 0, "<unknown>" (as
    // GetFrame and friends do).
    const Frame& frame(uint32_t id) const { return id < frames.size() ? frames[id] : frames[0]; }
    const std::vector<uint32_t>& stack(uint32_t id) const {
      return id < stacks.size() ? stacks[id] : stacks[0];
    }
    const std::string& string(uint32_t id) const {
      return id < strings.size() ? strings[id] : strings[0];
    }
  };
  void Copy(Snapshot* out) const;
  // One frame or stack or string; the returned copy is safe to keep.
  Frame GetFrame(uint32_t id) const;
  std::vector<uint32_t> GetStack(uint32_t id) const;
  std::string GetString(uint32_t id) const;
  // Frame 0 (the innermost) of a stack.
  uint32_t LeafFrame(uint32_t stack_id) const;

 private:
  using MethodLoc = FrameKey<vmtiMethodID>;
  uint32_t InternFrameLocked(const Frame& f);
  uint32_t ResolveFrame(vmtiEnv* env, const vmtiFrameInfo& fi, ErrorLog* log);

  mutable std::mutex mu_;
  std::unordered_map<MethodLoc, uint32_t, MethodLoc::Hash> by_location_;
  std::unordered_map<std::string, uint32_t> frame_index_;  // "fn\0file\0line"
  std::deque<Frame> frames_;
  std::unordered_map<std::string, uint32_t> stack_index_;  // raw frame ids
  std::deque<std::vector<uint32_t>> stacks_;
  std::unordered_map<std::string, uint32_t> string_index_;
  std::deque<std::string> strings_;
  std::unordered_map<const void*, uint32_t> classes_;
};

// Dense ids for sites keyed by (innermost frame id, class name id), the
// key leakcheck and lifetimes aggregate samples by; the agent keeps its
// per-site records in a vector indexed by them. Not thread-safe: the owner
// locks.
class SiteIds {
 public:
  // The id of (frame, klass). A pair not seen before gets the next id (0,
  // 1, ...) and sets *added, so that the caller appends its record.
  uint32_t Get(uint32_t frame, uint32_t klass, bool* added);

 private:
  std::unordered_map<uint64_t, uint32_t> ids_;
};

// "function file:line" (or "function file" without a line).
std::string FrameLabel(const Frame& f);

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_SITES_H_
