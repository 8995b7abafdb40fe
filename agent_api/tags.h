// Per-environment object tags, built on the GC's weak table, and the
// per-object state that keeps ObjectPromote/ObjectFree about their object.
//
// Design
// ------
// .record  Each tagged object has one record and one weak slot whose cookie
//   names this environment and the record, so the GC's "promoted" and
//   "died" reports route back to the record: that is how ObjectPromote and
//   ObjectFree are produced, and why a dead object's tag is still known.
//
// .record.reuse  A record outlives its tag: clearing a tag (SetTag 0,
//   DisposeEnvironment) or the object's death deletes the weak slot at once,
//   but the record stays reserved until every event its slot reported has
//   been handled (WeakTable::Delete says how many; weak_table.h, .seq). So an event queued behind another thread's delivery can never
//   be read as news about a later object that got the same record: when it
//   is handled, the record is still the one it was about, cleared, and the
//   event is dropped. Rejected: freeing the record with the tag (a queued
//   promotion was then delivered for whatever object was tagged next, and
//   that object's own promotion was lost), and never-reused 40-bit ids (a
//   bound on tags in a VM's life, and a hash lookup per event).
//
// .order  Events of one record are handled in the order its slot reported
//   them (WeakEvent::seq), one at a time: Begin claims the record for the
//   event due next, End releases it. An event that arrives early (its
//   predecessor is still queued on, or being delivered by, another thread)
//   is parked on the record, and the thread that ends the predecessor
//   delivers it. So a blocked callback holds up only later events of the
//   same object, never other objects' events or other threads.
//
// .tag.at-delivery  An event carries the tag the object has when the event
//   is handled (Begin), not when the collection found it: SetTag between the
//   two changes what is delivered, and clearing it drops the event.
//
// .index  Lookup by object (GetTag, SetTag) uses an address index. Old
//   objects never move (gc/collection.cc), so after a collection only the
//   records that were young when last indexed are looked up again
//   (`movable_`); the cost of bringing the index up to date is the young
//   tagged objects, not all of them. An entry whose object has died since
//   (its address may hold a new object now) is caught on lookup: a hit is
//   used only if the record's weak slot still holds exactly that address.
//   Rejected: rebuilding the whole index after every collection and after
//   every death (a thread tagging densely then rebuilt it under the lock once
//   per ObjectFree another thread delivered, and a forced collection's
//   delivery starved behind it).
//
// .epoch  Get and Set take an object address: their callers resolve the
//   handle, read the epoch and call them inside one VmScope
//   (agent_api/thread_states.h), so no collection runs between taking the
//   address and using it, and the address is never kept once the scope
//   ends. Without that, an address taken before a collection and used after
//   it misses its record (a lost tag) or gets a new weak slot for a dead
//   address, whose tag a later object allocated there inherits
//   (tests/agents/tag_race.mv). Begin and End take no address.
//
// .lock  One mutex guards records and index; nothing under it waits for a
//   safepoint or runs agent code, and no step under it is longer than one
//   record's work or, once per collection, the young records' re-indexing.
#ifndef MINIVM_AGENT_API_TAGS_H_
#define MINIVM_AGENT_API_TAGS_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "agent_api/check.h"
#include "base/sync.h"
#include "gc/heap.h"
#include "gc/object.h"
#include "gc/weak_table.h"

namespace minivm::agent {

// Cookies of weak slots: bits 40..63 = environment slot + 1, bits 0..39 =
// the tag record. Zero is "no tag" (a plain weak reference).
inline uint64_t TagCookie(int env_id, uint64_t record) {
  MINIVM_AGENT_DCHECK(env_id >= 0 && env_id + 1 < (1 << 24) && record < (uint64_t{1} << 40),
                      "tag cookie fields out of range (env %d, record %d)", env_id, record);
  return (static_cast<uint64_t>(env_id + 1) << 40) | record;
}
inline int CookieEnv(uint64_t cookie) { return static_cast<int>(cookie >> 40) - 1; }
inline uint64_t CookieRecord(uint64_t cookie) { return cookie & ((uint64_t{1} << 40) - 1); }

class TagMap {
 public:
  // Lookups read the heap's collection count and weak table; see .epoch.
  int64_t Get(gc::Heap& heap, gc::Object* obj);
  // tag 0 removes the tag.
  void Set(gc::Heap& heap, int env_id, gc::Object* obj, int64_t tag);

  // The delivery protocol (.order). Begin says what to do with a
  // kPromoted/kDied event of this map.
  enum class Action {
    kPost,    // deliver the event with *tag, then call End
    kDrop,    // nothing to deliver (cleared, or a repeat); call End
    kParked,  // nothing to do now: kept on the record, and whoever ends its
              // predecessor gets it from End (or, for a cookie that names
              // no held record, ignored)
  };
  Action Begin(const gc::WeakEvent& e, gc::WeakTable& table, int64_t* tag);
  // Ends the event Begin claimed. Returns the record's next event, with the
  // same cookie, if it was parked and is due now: the caller handles it
  // next (Begin again).
  std::optional<gc::WeakEvent> End(const gc::WeakEvent& e);

  // Calls fn(object, tag) for every tagged object still alive, in no
  // particular order. fn must not call back into this map.
  void ForEach(gc::WeakTable& table, absl::FunctionRef<void(gc::Object*, int64_t)> fn);
  // For heap walks (heap_walk.cc), with the world stopped: every tagged
  // object's tag by its current address, read under one lock; and a batch
  // of changes written back under one lock (tag 0 removes).
  absl::flat_hash_map<const gc::Object*, int64_t> Snapshot(gc::WeakTable& table);
  void SetAll(gc::Heap& heap, int env_id,
              const std::vector<std::pair<gc::Object*, int64_t>>& changes);

  // DisposeEnvironment: clears every tag (.record.reuse applies).
  void ClearAll(gc::WeakTable& table);
  // True when no record is held: no tag, and no event of one still to be
  // handled. Only then may the environment's slot serve another one.
  bool Empty();
  // Frees the storage of an Empty() map (a recycled environment's).
  void Release();

 private:
  enum class State : uint8_t {
    kFree,     // on free_
    kLive,     // tagged
    kCleared,  // tag removed; events still to be handled are dropped
    kDied,     // ObjectFree handled or being delivered
  };
  struct Parked {
    gc::WeakEventKind kind;
    uint32_t seq;
  };
  struct Record {
    gc::WeakSlotId slot = 0;
    int64_t tag = 0;
    const gc::Object* address = nullptr;  // its index key while kLive
    State state = State::kFree;
    bool promoted = false;  // a promotion was handled
    bool movable = false;   // young when last indexed (.index)
    bool listed = false;    // in movable_ (possibly stale)
    bool busy = false;      // an event of it is between Begin and End
    uint32_t handled = 0;   // events of its slot handled, in seq order
    uint32_t reported = 0;  // the slot's events in all, once it was deleted
    std::vector<Parked> parked;  // rare: only while an earlier event is in flight
  };
  static constexpr uint32_t kUnknown = ~uint32_t{0};

  void CatchUpIndexLocked(gc::Heap& heap) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The live record tagging obj, or nullopt (.index's check included).
  std::optional<uint64_t> FindLocked(gc::WeakTable& table, const gc::Object* obj)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetLocked(gc::Heap& heap, int env_id, gc::Object* obj, int64_t tag)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes the record's slot and index entry; state becomes `to`.
  void RetireLocked(gc::WeakTable& table, uint64_t r, State to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeIfDoneLocked(uint64_t r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  base::Mutex mu_;
  std::vector<Record> records_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> free_ ABSL_GUARDED_BY(mu_);
  size_t held_ ABSL_GUARDED_BY(mu_) = 0;  // records not kFree
  absl::flat_hash_map<const gc::Object*, uint64_t> index_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> movable_ ABSL_GUARDED_BY(mu_);
  uint64_t index_epoch_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_TAGS_H_
