#include "gc/marker.h"

namespace minivm::gc {

void Marker::Mark(Value v) {
  if (!v.IsRef()) return;
  Object* o = v.AsRef();
  if (IsMarked(o)) return;
  o->gc_word |= gc_word::kMarked;
  const size_t size = o->Size();
  marked_bytes_ += size;
  if (young_.Contains(reinterpret_cast<uintptr_t>(o))) {
    young_marked_.push_back(o);
    ++young_class_counts_[SizeClassIndex(size)];
  }
  if (o->klass->kind != LayoutKind::kByteArray) stack_.push_back(o);
}

void Marker::Drain() {
  while (!stack_.empty()) {
    Object* o = stack_.back();
    stack_.pop_back();
    for (Value *s = o->SlotsBegin(), *e = o->SlotsEnd(); s < e; ++s) Mark(*s);
  }
}

}  // namespace minivm::gc
