#include "gc/heap_walker.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "gc/generational_heap.h"

namespace minivm::gc {
namespace {

class Walk final : public RootVisitor {
 public:
  Walk(uintptr_t base, size_t size, HeapWalkVisitor& visitor)
      : base_(base),
        words_((size / kObjectAlignment + 63) / 64),
        // calloc maps a large block fresh: its pages are zero until touched,
        // so a walk pays only for the part of the bitmap it uses.
        visited_(static_cast<uint64_t*>(std::calloc(words_, sizeof(uint64_t)))),
        visitor_(visitor) {
    visited_ptr_.reset(visited_);
  }

  bool WantsRootInfo() const override { return true; }
  void SetRootInfo(const RootInfo& info) override { info_ = info; }
  void VisitRoots(Value* begin, Value* end) override {
    for (Value* s = begin; s < end && !stats_.aborted; ++s) {
      if (!s->IsRef()) continue;
      RootInfo one = info_;
      one.index += s - begin;
      one.slot += static_cast<int32_t>(s - begin);
      ++stats_.roots;
      Act(visitor_.OnRoot(one, s->AsRef()), s->AsRef());
    }
  }

  bool ok() const { return visited_ != nullptr; }
  void Start(Object* o) { Enqueue(o); }

  void Drain() {
    while (!queue_.empty() && !stats_.aborted) {
      Object* o = queue_.front();
      queue_.pop_front();
      ++stats_.followed;
      Value* const begin = o->SlotsBegin();
      for (Value *s = begin, *e = o->SlotsEnd(); s < e && !stats_.aborted; ++s) {
        if (!s->IsRef()) continue;
        ++stats_.references;
        Act(visitor_.OnReference(o, static_cast<uint32_t>(s - begin), s->AsRef()), s->AsRef());
      }
    }
  }

  const HeapWalkStats& stats() const { return stats_; }

 private:
  void Act(HeapWalkVisitor::Action action, Object* o) {
    if (action == HeapWalkVisitor::Action::kAbort) {
      stats_.aborted = true;
    } else if (action == HeapWalkVisitor::Action::kFollow) {
      Enqueue(o);
    }
  }

  // Queues o unless it was queued before (heap_walker.h .once).
  void Enqueue(Object* o) {
    const uint64_t granule = (reinterpret_cast<uintptr_t>(o) - base_) / kObjectAlignment;
    if (visited_ == nullptr || granule / 64 >= words_) return;  // not a heap object (or no
                                                                 // memory): nothing to scan
    uint64_t& word = visited_[granule / 64];
    const uint64_t bit = uint64_t{1} << (granule % 64);
    if ((word & bit) != 0) return;
    word |= bit;
    const HeapWalkVisitor::Action action = visitor_.OnFirstVisit(o);
    if (action == HeapWalkVisitor::Action::kAbort) {
      stats_.aborted = true;
    } else if (action == HeapWalkVisitor::Action::kFollow &&
               o->klass->kind != LayoutKind::kByteArray) {
      queue_.push_back(o);
    }
  }

  const uintptr_t base_;
  const size_t words_;
  std::unique_ptr<uint64_t, decltype(&std::free)> visited_ptr_{nullptr, &std::free};
  uint64_t* const visited_;
  std::deque<Object*> queue_;
  HeapWalkVisitor& visitor_;
  RootInfo info_;
  HeapWalkStats stats_;
};

}  // namespace

HeapWalkStats WalkObjectGraph(uintptr_t base, size_t size,
                              absl::FunctionRef<void(RootVisitor&)> visit_roots, Object* start,
                              HeapWalkVisitor& visitor) {
  Walk walk(base, size, visitor);
  if (!walk.ok()) {  // no memory for the bitmap: report nothing rather than a wrong walk
    HeapWalkStats stats;
    stats.aborted = true;
    return stats;
  }
  if (start != nullptr) {
    walk.Start(start);
  } else {
    visit_roots(walk);
  }
  walk.Drain();
  return walk.stats();
}

std::optional<HeapWalkStats> GenerationalHeap::WalkHeap(Mutator* requester, const Value* start_slot,
                                                        HeapWalkVisitor& visitor) {
  while (!safepoints_.Begin(requester)) {
    if (safepoints_.stopped_for_good()) return std::nullopt;  // the VM is dying
  }
  // Read inside the pause: the slot is a root, so it holds the object's
  // current address whatever collections ran before the world stopped.
  Object* start = nullptr;
  if (start_slot != nullptr) start = start_slot->IsRef() ? start_slot->AsRef() : nullptr;
  const auto begin = std::chrono::steady_clock::now();
  HeapWalkStats stats;
  if (start_slot == nullptr || start != nullptr) {
    visitor.OnWalkStart();
    stats = WalkObjectGraph(
        base_, size_, [this](RootVisitor& v) { VisitAllRoots(v); }, start, visitor);
    visitor.OnWalkEnd();
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  // The walk is a pause like a collection's (callbacks included): logged
  // with them.
  if (options_.verbose_gc && options_.gc_log != nullptr) {
    absl::FPrintF(options_.gc_log, "[gc] heap walk (%s) %u roots, %u objects, %u references%s %.3fms\n",
                  start != nullptr ? "from an object" : "from the roots", stats.roots,
                  stats.followed, stats.references, stats.aborted ? ", aborted" : "", ms);
    std::fflush(options_.gc_log);
  }
  safepoints_.End(requester);
  return stats;
}

}  // namespace minivm::gc
