#include "gc/verifier.h"

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "gc/check.h"
#include "gc/generational_heap.h"
#include "gc/size_classes.h"

namespace minivm::gc {
namespace {

// Field counts beyond this are certainly a corrupt klass.
constexpr uint32_t kMaxSaneFieldCount = 1u << 20;

class HeapVerifier final : public RootVisitor {
 public:
  HeapVerifier(const VerifierInputs& in, const char* when) : in_(in), when_(when) {}

  void Run() {
    CheckTlabs();  // first: the eden walk skips the tails they give
    WalkEden();
    WalkSurvivor();
    WalkOld();
    in_.old->VerifyFreeLists();
    where_ = "a global root";
    in_.vm->VisitGlobalRoots(*this);
    for (Mutator* m : *in_.mutators) {
      where_ = "a mutator root";
      in_.vm->VisitMutatorRoots(m, *this);
    }
    where_ = "a weak slot";
    in_.weak->ForEach([&](Object* o) { CheckRef(nullptr, Value::Ref(o)); });
    while (!stack_.empty()) {
      Object* o = stack_.back();
      stack_.pop_back();
      CheckSlots(o);
    }
  }

  void VisitRoots(Value* begin, Value* end) override {
    for (Value* s = begin; s < end; ++s) CheckRef(nullptr, *s);
  }

 private:
  void CheckHeader(const Object* o, uintptr_t space_limit, const char* space) {
    const auto p = reinterpret_cast<uintptr_t>(o);
    MINIVM_GC_CHECK(o->klass != nullptr, "%s: object %#x in %s has a null klass", when_, p, space);
    const auto kind = static_cast<uint8_t>(o->klass->kind);
    MINIVM_GC_CHECK(kind <= static_cast<uint8_t>(LayoutKind::kByteArray),
                    "%s: object %#x in %s has a klass of unknown kind %d", when_, p, space, kind);
    MINIVM_GC_CHECK(
        o->klass->kind != LayoutKind::kFields || o->klass->field_count <= kMaxSaneFieldCount,
        "%s: object %#x in %s has %d fields", when_, p, space, o->klass->field_count);
    MINIVM_GC_CHECK(o->klass->kind == LayoutKind::kFields || o->length() < (uint64_t{1} << 40),
                    "%s: array %#x in %s has length %d", when_, p, space, o->length());
    const size_t size = o->Size();
    MINIVM_GC_CHECK(size >= kHeaderSize && size % kObjectAlignment == 0 && p + size <= space_limit,
                    "%s: object %#x in %s has size %d, overrunning its space (limit %#x)", when_, p,
                    space, size, space_limit);
    MINIVM_GC_CHECK(
        (o->gc_word & (gc_word::kForwarded | gc_word::kMarked)) == 0 && (o->gc_word >> 6) == 0,
        "%s: object %#x in %s has gc_word %#x outside a collection", when_, p, space, o->gc_word);
  }

  void WalkEden() {
    const YoungGen& y = *in_.young;
    uintptr_t p = y.eden_base();
    const uintptr_t top = y.eden_top();
    while (p < top) {
      if (auto tail = live_tlab_tails_.find(p); tail != live_tlab_tails_.end()) {
        p = tail->second;  // stale bytes up to the TLAB's end
        continue;
      }
      uint64_t word;
      std::memcpy(&word, reinterpret_cast<void*>(p), 8);
      if (word == 0) {  // eden never written (young_gen.h .parsable)
        p += 8;
        continue;
      }
      if (IsFillerWord(word)) {  // a retired TLAB's tail
        const size_t bytes = FillerBytes(word);
        MINIVM_GC_CHECK(bytes >= 8 && bytes % kObjectAlignment == 0 && p + bytes <= top,
                        "%s: filler word %#x at %#x in eden covers %d bytes, past its top %#x",
                        when_, word, p, bytes, top);
        p += bytes;
        continue;
      }
      auto* o = reinterpret_cast<Object*>(p);
      CheckHeader(o, top, "eden");
      starts_.insert(p);
      p += o->Size();
    }
  }

  void WalkSurvivor() {
    const SemiSpace& s = in_.young->from();
    for (uintptr_t p = s.base; p < s.top;) {
      auto* o = reinterpret_cast<Object*>(p);
      CheckHeader(o, s.top, "the survivor space");
      starts_.insert(p);
      p += o->Size();
    }
    const SemiSpace& to = in_.young->to();
    MINIVM_GC_CHECK(to.top == to.base, "%s: the to-survivor is not empty", when_);
  }

  void WalkOld() {
    in_.old->ForEachObject([&](Object* o) {
      const auto p = reinterpret_cast<uintptr_t>(o);
      CheckHeader(o, in_.old->limit(), "the old generation");
      const size_t size = o->Size();
      MINIVM_GC_CHECK(in_.old->IsObjectStart(p), "%s: old object %#x is not at a cell start", when_,
                      p);
      if (size <= kLargeObjectThreshold) {
        // Small objects sit in a cell of exactly their class: a cell start
        // plus the class check below pins the object inside its cell.
        uintptr_t page = in_.old->base() + (p - in_.old->base()) / kPageSize * kPageSize;
        MINIVM_GC_CHECK(p + size <= page + kPageSize, "%s: old object %#x overruns its page", when_,
                        p);
      }
      old_objects_.push_back(o);
    });
    for (Object* o : old_objects_) CheckSlots(o);
  }

  void CheckTlabs() {
    const YoungGen& y = *in_.young;
    for (Mutator* m : *in_.mutators) {
      const Tlab& t = m->tlab;
      MINIVM_GC_CHECK(t.start <= t.top && t.top <= t.current_end && t.current_end <= t.end,
                      "%s: TLAB [%#x %#x %#x %#x] breaks start <= top <= current_end <= end", when_,
                      t.start, t.top, t.current_end, t.end);
      if (t.end == 0) continue;
      MINIVM_GC_CHECK(t.start >= y.eden_base() && t.end <= y.eden_top(),
                      "%s: TLAB [%#x, %#x) lies outside eden's used part", when_, t.start, t.end);
      if (t.top < t.end) live_tlab_tails_[t.top] = t.end;
    }
  }

  void CheckSlots(Object* o) {
    for (Value *s = o->SlotsBegin(), *e = o->SlotsEnd(); s < e; ++s) CheckRef(o, *s);
  }

  void CheckRef(Object* holder, Value v) {
    if (!v.IsRef()) return;
    const uintptr_t p = v.bits();
    const auto h = reinterpret_cast<uintptr_t>(holder);
    // Old objects are checked by page arithmetic; only young starts are in
    // the hash set, which keeps --verify-heap affordable under --gc-stress.
    const bool valid = in_.old->Contains(p) ? in_.old->IsObjectStart(p) : starts_.contains(p);
    MINIVM_GC_CHECK(valid, "%s: %s%#x refers to %#x, which is not an object start in a live space",
                    when_, holder != nullptr ? "object " : where_,
                    holder != nullptr ? h : uintptr_t{0}, p);
    if (holder != nullptr && in_.old->Contains(h) && in_.young->Contains(p)) {
      MINIVM_GC_CHECK(in_.cards->IsDirty(h),
                      "%s: old object %#x refers to young object %#x but its card is clean", when_,
                      h, p);
    }
    if (!in_.old->Contains(p) && visited_.insert(p).second) stack_.push_back(v.AsRef());
  }

  const VerifierInputs& in_;
  const char* const when_;
  const char* where_ = "";
  absl::flat_hash_set<uintptr_t> starts_;                      // young objects only
  absl::flat_hash_map<uintptr_t, uintptr_t> live_tlab_tails_;  // top -> end
  absl::flat_hash_set<uintptr_t> visited_;
  std::vector<Object*> old_objects_;
  std::vector<Object*> stack_;
};

}  // namespace

void VerifyHeap(const VerifierInputs& in, const char* when) { HeapVerifier(in, when).Run(); }

void GenerationalHeap::Verify(const char* when) {
  VerifyHeap(VerifierInputs{&*young_, &*old_, &cards_, vm_, &safepoints_.mutators(), &weak_}, when);
}

}  // namespace minivm::gc
