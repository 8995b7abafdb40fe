// Weakly held object slots, and the events the GC reports about them.
//
// Design:
// 1. One mechanism for every weak reference the runtime needs (the agent
//    API's tracked samples first): a slot holds an object and a client
//    cookie; Get returns the object's current address, or null once it died.
//    Slots are usable from any thread; one mutex guards the table. A caller
//    must be a running mutator (or hold no heap pointers across a safepoint)
//    for the returned address to stay valid, exactly like any other pointer.
// 2. The GC processes the table inside the pause, after it has found
//    every live object: it rewrites moved slots, clears dead ones, and
//    records one WeakEvent per affected slot: kMoved (still young),
//    kPromoted (now in the old generation) or kDied. Old objects that survive
//    a collection report nothing.
// 3. Events are buffered during the pause and handed to the WeakObserver
//    after the world restarts, never inside the stop-the-world: an observer
//    may allocate, take locks or run agent code. Within one collection they
//    come in slot order (the order the collection finds them, which is slot
//    creation order while no slot is reused); across collections, in
//    collection order (see Heap::DeliverWeakEvents). Rejected: calling the
//    observer inside the pause (an agent that allocates would deadlock) and
//    per-slot callbacks under the table lock (same problem).
// 4. A died slot stays allocated (reading null) until the client deletes it,
//    so the cookie in the event can still name it.
#ifndef MINIVM_GC_WEAK_TABLE_H_
#define MINIVM_GC_WEAK_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "gc/object.h"
#include "gc/sync.h"

namespace minivm::gc {

using WeakSlotId = uint32_t;

enum class WeakEventKind : uint8_t { kMoved, kPromoted, kDied };

struct WeakEvent {
  WeakEventKind kind;
  WeakSlotId slot;
  uint64_t cookie;
  Object* new_address;  // null for kDied
};

// Implemented outside gc/ (the agent API). Called with no heap lock held, by
// a running mutator, after the collection's pause.
class WeakObserver {
 public:
  virtual ~WeakObserver() = default;
  virtual void OnWeakEvents(absl::Span<const WeakEvent> events) = 0;
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
  void Delete(WeakSlotId id);
  size_t size() const;

  // GC only, inside a pause. Applies `fate` to every slot holding an
  // object; appends events when `events` is non-null.
  void Process(FateFn fate, std::vector<WeakEvent>* events);
  // GC only (verifier): visits every held object.
  void ForEach(absl::FunctionRef<void(Object*)> fn) const;

 private:
  struct Slot {
    Object* obj = nullptr;
    uint64_t cookie = 0;
    bool in_use = false;
  };
  mutable Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<WeakSlotId> free_ ABSL_GUARDED_BY(mu_);
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_WEAK_TABLE_H_
