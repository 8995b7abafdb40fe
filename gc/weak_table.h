// Weakly held object slots, and the events the GC reports about them.
//
// Design:
// .slots  One mechanism for every weak reference the runtime needs (the agent
//    API's tracked samples first): a slot holds an object and a client
//    cookie; Get returns the object's current address, or null once it died.
//    Slots are usable from any thread; one mutex guards the table. A caller
//    must be a running mutator (or hold no heap pointers across a safepoint)
//    for the returned address to stay valid, exactly like any other pointer.
// .pause  The GC processes the table inside the pause, after it has found
//    every live object: it rewrites moved slots, clears dead ones, and
//    records one WeakEvent per affected slot: kMoved (still young),
//    kPromoted (now in the old generation) or kDied. Old objects that survive
//    a collection report nothing.
// .delivery  Events are buffered during the pause and handed to the WeakObserver
//    after the world restarts, never inside the stop-the-world: an observer
//    may allocate, take locks or run agent code. Each collecting thread
//    hands over its own collection's events (in slot order) and nothing
//    else, so a slow observer holds up only the thread it runs on; events
//    of different collections may therefore reach the observer on several
//    threads at once, and on one thread nested (an observer that collects).
//    What keeps them in order is the per-slot sequence number below, not
//    the order of calls. Rejected: one process-wide delivery queue drained
//    by whichever thread found it idle (it serialised every thread's
//    events behind one blocked observer, and made an explicit collection
//    wait for other threads' callbacks); calling the observer inside the
//    pause (an agent that allocates would deadlock); per-slot callbacks
//    under the table lock (same problem).
// .seq  Sequence: each slot numbers the kPromoted and kDied events it reports,
//    from 0 (WeakEvent::seq; kMoved events are not numbered: they carry no
//    news an observer must order). An observer that acts on a slot's event
//    k only after acting on k-1 sees every slot's events in the order the
//    collections found them, however the threads interleave. Delete returns
//    how many events the slot reported in all, so the client knows how
//    many to wait for before it reuses whatever the cookie names.
// .died  A died slot stays allocated (reading null) until the client deletes it,
//    so the cookie in the event can still name it.
// .young  A minor collection visits only the slots that may hold a young
//    object: a list of them, which a slot joins when it is created and
//    leaves once its object is found promoted, dead or outside the young
//    generation (objects never become young again), or the slot is
//    deleted. So a minor pause costs in proportion to the samples taken
//    since the last one, not to every sample an agent ever kept: an agent
//    holding a weak reference per sample for a whole run (HotSpot's
//    HeapMonitor tests do) would otherwise make every minor collection scan
//    them all. The list is sorted before each pass, so events still come in
//    slot order. A full collection visits every slot (old objects die
//    there). Rejected: a generation bit per slot scanned in full (still a
//    pass over every slot); two tables, young and old (a promotion would
//    move the slot and change the id agents hold).
#ifndef MINIVM_GC_WEAK_TABLE_H_
#define MINIVM_GC_WEAK_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "base/sync.h"
#include "gc/object.h"

namespace minivm::gc {

using WeakSlotId = uint32_t;

enum class WeakEventKind : uint8_t { kMoved, kPromoted, kDied };

struct WeakEvent {
  WeakEventKind kind;
  WeakSlotId slot;
  uint64_t cookie;
  Object* new_address;  // null for kDied
  uint32_t seq = 0;     // kPromoted/kDied: the slot's events before this one
};

// Implemented outside gc/ (the agent API), on the thread that ran the
// collection (.delivery): on several threads at once, and re-entered
// on one thread by an observer that collects.
class WeakObserver {
 public:
  virtual ~WeakObserver() = default;
  // Inside the pause, once per collection that reported events: the
  // observer keeps them where it can always reach them (no waiting, no
  // allocation on the VM heap, no agent code). So no event is ever held
  // only by a thread's stack: a thread stopped for good right after the
  // pause (VM death) strands nothing.
  virtual void OnWeakEventsFound(absl::Span<const WeakEvent> events) = 0;
  // After the pause, with no heap lock held, on the same thread: deliver
  // what this thread found. An allocation calls it once its new object is
  // in a root (generational_heap.cc).
  virtual void DeliverFoundWeakEvents() = 0;
};

class WeakTable {
 public:
  // What became of a slot's object in a collection, as the GC sees it.
  struct Fate {
    WeakEventKind kind;
    Object* new_address;  // for kMoved / kPromoted
  };
  // Returns false when the object is unaffected by the collection.
  using FateFn = absl::FunctionRef<bool(Object* obj, Fate* fate)>;

  WeakSlotId Create(Object* obj, uint64_t cookie);
  // The object, or nullptr once it died.
  Object* Get(WeakSlotId id) const;
  uint64_t Cookie(WeakSlotId id) const;
  // Frees the slot for reuse; returns how many kPromoted/kDied events it
  // reported in its life (.seq).
  uint32_t Delete(WeakSlotId id);
  // For ids a client hands out and gets back (an agent's weak references):
  // nothing is trusted, nothing CHECKs. Whether `id` is a slot in use with
  // `cookie`, and whether its object died; and a delete that happens only
  // if it is (false otherwise, also for a second delete racing the first).
  enum class Lookup { kAbsent, kLive, kDied };
  Lookup Find(WeakSlotId id, uint64_t cookie) const;
  bool TryDelete(WeakSlotId id, uint64_t cookie);
  size_t size() const;

  // Which slots a pass visits (.young): those that may hold a young
  // object, for a collection that moves or frees only young objects, or
  // every slot holding an object.
  enum class Scope { kYoung, kAll };
  // GC only, inside a pause. Applies `fate` to the slots of `scope` that
  // hold an object, in slot order; appends events when `events` is
  // non-null. In a kYoung pass, `fate` returning false means the object is
  // not young (.young).
  void Process(Scope scope, FateFn fate, std::vector<WeakEvent>* events);
  // GC only (verifier): visits every held object.
  void ForEach(absl::FunctionRef<void(Object*)> fn) const;

 private:
  struct Slot {
    Object* obj = nullptr;
    uint64_t cookie = 0;
    uint32_t reported = 0;  // kPromoted/kDied events so far: the next seq
    bool in_use = false;
    bool listed_young = false;  // in young_ (outlives a Delete until the next pass)
  };
  // Applies `fate` to slot `id` (which holds an object) and records the
  // event; false when the object was unaffected, else its fate in *kind.
  bool Apply(WeakSlotId id, FateFn fate, std::vector<WeakEvent>* events, WeakEventKind* kind)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  mutable base::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<WeakSlotId> free_ ABSL_GUARDED_BY(mu_);
  std::vector<WeakSlotId> young_ ABSL_GUARDED_BY(mu_);  // .young, each id once
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_WEAK_TABLE_H_
