// Walking the object graph for tools (the agent API's FollowReferences and
// IterateThroughHeap): breadth-first from the roots, or from one object, with
// the world stopped.
//
// Design:
// .scans  One copy of the root and object scans. Roots come from the collector's
//    own root enumeration (GenerationalHeap::VisitAllRoots, i.e. the VM's
//    VmInterface plus the sample root) with a visitor that asks for root
//    kinds (RootVisitor::WantsRootInfo); references come from the same
//    Object::SlotsBegin/SlotsEnd ranges the marker and scavenger scan. A
//    slot's index in that range is the field index (kFields) or the element
//    index (kRefArray).
// .bfs  Breadth-first with an explicit FIFO queue, never recursion: a list of
//    millions of objects cannot overflow the C stack, and the first path
//    found to an object is a shortest one from the root set (leak tools'
//    "path to GC roots" relies on it).
// .visited  The visited set is a bitmap over the heap's reservation, one bit per
//    8-byte granule (size / 64 bytes: 16 MiB for a 1 GiB heap), not the
//    header's mark bit: the walk then never writes to objects, and an
//    aborted walk leaves nothing to clean up.
// .once  An object is followed (its references reported) at most once: when it
//    is first reached by a report whose answer is kFollow. Every reference
//    out of a followed object is reported, to visited objects too, so each
//    reference is reported exactly once.
// .no-alloc  The walk never allocates on the heap and never collects; the visitor
//    must not either (the world is stopped by the calling thread).
#ifndef MINIVM_GC_HEAP_WALKER_H_
#define MINIVM_GC_HEAP_WALKER_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "gc/object.h"
#include "gc/vm_interface.h"

namespace minivm::gc {

class HeapWalkVisitor {
 public:
  enum class Action { kSkip, kFollow, kAbort };
  virtual ~HeapWalkVisitor() = default;
  // A root slot refers to `obj`. `info` describes this one slot (index and
  // slot are already the slot's own, not the range's first).
  virtual Action OnRoot(const RootInfo& info, Object* obj) = 0;
  // Slot `index` of `referrer` refers to `referee`.
  virtual Action OnReference(Object* referrer, uint32_t index, Object* referee) = 0;
  // `obj` is reached for the first time by a report answered kFollow (or is
  // the start object): called once per object, before its references are
  // scanned. kSkip leaves its references unscanned.
  virtual Action OnFirstVisit(Object* /*obj*/) { return Action::kFollow; }
  // Heap::WalkHeap calls these inside the pause, before the first report
  // and after the last: addresses read or kept between them are current.
  virtual void OnWalkStart() {}
  virtual void OnWalkEnd() {}
};

struct HeapWalkStats {
  uint64_t roots = 0;       // root slots holding a reference
  uint64_t references = 0;  // object-to-object references reported
  uint64_t followed = 0;    // objects whose references were scanned
  bool aborted = false;     // the visitor answered kAbort
};

// The walk itself, over a heap reserved at [base, base + size). From the
// roots that `visit_roots` reports when `start` is null, else from `start`
// (which is followed without being reported, as JVMTI's initial_object).
// The caller has stopped the world.
HeapWalkStats WalkObjectGraph(uintptr_t base, size_t size,
                              absl::FunctionRef<void(RootVisitor&)> visit_roots, Object* start,
                              HeapWalkVisitor& visitor);

}  // namespace minivm::gc

#endif  // MINIVM_GC_HEAP_WALKER_H_
