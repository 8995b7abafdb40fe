// Per-environment object tags, built on the GC's weak table.
//
// Design:
// 1. Each tagged object holds one weak slot whose cookie names this
//    environment and the tag record, so the GC's "promoted" and
//    "died" reports route back to the record: that is how ObjectPromote and
//    ObjectFree are produced, and why a dead object's tag is still known.
// 2. Lookup by object (GetTag, SetTag) uses an address index. Objects move,
//    so the index is stamped with the collection count it was built at and
//    rebuilt from the weak slots on the first lookup after any collection.
//    Rebuilding on demand rather than when the weak events arrive closes the
//    window between the end of a pause and the delivery of its events, in
//    which another thread may already look up an object at its new address.
// 3. All operations take the map's mutex. Get and Set take an object
//    address: their callers resolve the handle, read the epoch and call them
//    inside one VmScope (agent_api/thread_states.h), so no collection runs
//    between taking the address and using it, and the address is never kept
//    once the scope ends. Callbacks run in native state; without this, an
//    address taken before a collection and used after it misses its record
//    (a lost tag) or gets a new weak slot for a dead address, whose tag a
//    later object allocated there inherits (the stale tags that stopped the
//    first native-state attempt; tests/agents/tag_race.mv reproduces it).
//    The index is only ever built or used with an epoch read in the same
//    VM-state interval as the address, so the stamp is consistent too.
//    OnPromoted and OnDied take no address. A holder of the mutex never
//    waits for a safepoint, so a collection waits at most for it to finish.
#ifndef MINIVM_AGENT_API_TAGS_H_
#define MINIVM_AGENT_API_TAGS_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/container/flat_hash_map.h"
#include "agent_api/check.h"
#include "gc/sync.h"
#include "gc/object.h"
#include "gc/weak_table.h"

namespace minivm::agent {

// Cookies of weak slots: bits 40..63 = environment id + 1, bits 0..39 = the
// tag record. Zero is "no tag" (a plain weak reference).
inline uint64_t TagCookie(int env_id, uint64_t record) {
  MINIVM_AGENT_DCHECK(env_id >= 0 && env_id + 1 < (1 << 24) && record < (uint64_t{1} << 40),
                      "tag cookie fields out of range (env %d, record %d)", env_id, record);
  return (static_cast<uint64_t>(env_id + 1) << 40) | record;
}
inline int CookieEnv(uint64_t cookie) { return static_cast<int>(cookie >> 40) - 1; }
inline uint64_t CookieRecord(uint64_t cookie) { return cookie & ((uint64_t{1} << 40) - 1); }

class TagMap {
 public:
  // `epoch` is the heap's collection count now.
  int64_t Get(gc::WeakTable& table, uint64_t epoch, gc::Object* obj);
  // tag 0 removes the tag.
  void Set(gc::WeakTable& table, uint64_t epoch, int env_id, gc::Object* obj, int64_t tag);

  // From the GC's reports. Promoted: the tag, once per record (nullopt
  // when already reported). Died: the tag; the record and slot are freed.
  std::optional<int64_t> OnPromoted(uint64_t record);
  std::optional<int64_t> OnDied(gc::WeakTable& table, uint64_t record);

  // Calls fn(object, tag) for every tagged object still alive, in no
  // particular order. fn must not call back into this map.
  void ForEach(gc::WeakTable& table, absl::FunctionRef<void(gc::Object*, int64_t)> fn);
  // For heap walks (heap_walk.cc), with the world stopped: every tagged
  // object's tag by its current address, read under one lock; and a batch
  // of changes written back under one lock (tag 0 removes).
  absl::flat_hash_map<const gc::Object*, int64_t> Snapshot(gc::WeakTable& table, uint64_t epoch);
  void SetAll(gc::WeakTable& table, uint64_t epoch, int env_id,
              const std::vector<std::pair<gc::Object*, int64_t>>& changes);


 private:
  struct Record {
    gc::WeakSlotId slot = 0;
    int64_t tag = 0;
    bool in_use = false;
    bool promoted = false;
  };
  void RebuildIndexLocked(gc::WeakTable& table, uint64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetLocked(gc::WeakTable& table, int env_id, gc::Object* obj, int64_t tag)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  gc::Mutex mu_;
  std::vector<Record> records_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> free_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<const gc::Object*, uint64_t> index_ ABSL_GUARDED_BY(mu_);
  uint64_t index_epoch_ ABSL_GUARDED_BY(mu_) = ~uint64_t{0};
};

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_TAGS_H_
