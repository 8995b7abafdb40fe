// Marking for full collections: a depth-first trace from the roots over the
// whole heap (young and old), setting kMarked in each reached object's
// gc_word. Old objects are then swept (old_space.h); young ones are either
// all evacuated to the old generation or, when they cannot all fit, left in
// place and unmarked again (collection.cc).
//
// .stack  An explicit mark stack, never recursion (deep lists would overflow the
//    C stack). Rejected: a mark bitmap (one more side structure to keep in
//    sync; the header has the bit already and sweep visits every cell).
// .young-classes  While marking, young objects are recorded with their size class so the
//    GC can decide exactly whether the old generation can absorb them.
#ifndef MINIVM_GC_MARKER_H_
#define MINIVM_GC_MARKER_H_

#include <array>
#include <cstdint>
#include <vector>

#include "gc/object.h"
#include "gc/size_classes.h"
#include "gc/vm_interface.h"
#include "gc/young_gen.h"

namespace minivm::gc {

class Marker final : public RootVisitor {
 public:
  explicit Marker(const YoungGen& young) : young_(young) {}

  void VisitRoots(Value* begin, Value* end) override {
    for (Value* s = begin; s < end; ++s) Mark(*s);
  }
  void Drain();

  static bool IsMarked(const Object* o) { return (o->gc_word & gc_word::kMarked) != 0; }

  const std::vector<Object*>& young_marked() const { return young_marked_; }
  const std::array<uint64_t, kNumSizeClasses>& young_class_counts() const {
    return young_class_counts_;
  }
  uint64_t marked_bytes() const { return marked_bytes_; }

 private:
  void Mark(Value v);

  const YoungGen& young_;
  std::vector<Object*> stack_;
  std::vector<Object*> young_marked_;
  std::array<uint64_t, kNumSizeClasses> young_class_counts_{};
  uint64_t marked_bytes_ = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_MARKER_H_
