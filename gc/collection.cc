// The collection plan: what a pause does, and when.
//
// Design:
// .stw  Every collection is stop-the-world (safepoint.h) and run by the thread
//    that needed it; only one runs at a time. TLABs are retired at the start
//    (each with a filler word over its tail, young_gen.h) and every thread
//    starts afresh after.
// .minor  Minor collection: Cheney evacuation of eden and the from-survivor
//    (scavenger.h), roots = VM roots + dirty cards of the old generation.
//    Pause cost: roots + card table + survivors; eden is never touched.
// .guarantee  Promotion guarantee: a minor collection runs only when the old
//    generation's free pages can absorb every young byte in the worst case
//    (young bytes x WorstCaseExpansion + one partly filled page per class);
//    otherwise the collection is upgraded to a full one. So promotion never
//    fails mid-copy. Rejected: HotSpot's averaged-promotion heuristic with a
//    promotion-failure fallback (self-forwarding), far more code to get right.
// .full  Full collection: mark the whole heap, report dead weak slots, sweep the
//    old generation, then evacuate all live young objects into it if the
//    exact need (marked young objects per size class) fits; if not, young
//    objects stay where they are, eden stays full, and the allocation that
//    asked reports heap exhaustion. Cards stay exact either way.
// .tenuring  Adaptive tenuring (HotSpot's): after a minor collection the threshold
//    becomes the smallest age at which the survivors of that age and younger
//    exceed half a survivor space, capped at max_tenuring_threshold.
// .weak  Weak slots are processed inside the pause once liveness is known; the
//    weak observer takes their events before the world restarts and
//    delivers them after, on the collecting thread (DeliverFoundWeakEvents;
//    gc/weak_table.h, .delivery).
// .occupancy  Old-generation occupancy target (Go's GOGC=100 pacing, applied
//    to occupancy since there is no concurrent cycle): after each full
//    collection the target becomes twice the old generation's live bytes, at
//    least kMinOldTarget and at most its capacity. Past it, a minor
//    collection is upgraded to full and a large object collects before it is
//    placed (generational_heap.cc). Why: the reservation's pages are touched for the first
//    time when used, and freed pages are reused lowest first, so the old
//    generation's high-water mark is what the process pays in page faults
//    and resident memory. A full collection costs the live bytes, so
//    collecting at twice the live bytes costs at most one mark of each
//    allocated byte. An old generation smaller than kMinOldTarget collects
//    only when full. Rejected: collecting only when the old generation is
//    full (a program that keeps a few MB of large arrays live touches every
//    page of the old generation; alloc_mix, docs/performance.md).
// .eden-sizing  Unless `--young` fixes it (as HotSpot's -Xmn does), eden
//    starts at kInitialEden of its reservation. After a minor collection
//    that kept more than an eighth of the bytes it collected (eden and the
//    from-survivor; kept = copied plus promoted) it grows to eight times
//    what was kept, at least double, up to the reservation. It never
//    shrinks. A collection that ran with eden less than half full
//    (explicit, stress) says nothing about the size and changes nothing.
//    Why: a young collection costs its survivors, not eden's size, so a
//    small eden costs only more frequent pauses while objects die young, and
//    it saves the first touch of every eden page and keeps the TLABs'
//    zeroing in cache. A high survival rate means the eden is too small for
//    the program's transient structures, which it would promote half-built,
//    so eden then grows at once. Rejected: a fixed eden (a large one pays
//    page faults for space it never fills; a small one promotes
//    transient structures; binary trees, docs/performance.md).
#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "gc/check.h"
#include "gc/generational_heap.h"
#include "gc/marker.h"
#include "gc/mutator_data.h"
#include "gc/scavenger.h"
#include "gc/size_classes.h"

namespace minivm::gc {
namespace {

constexpr double kTargetSurvivorRatio = 0.5;
constexpr size_t kMinOldTarget = size_t{64} << 20;
constexpr size_t kInitialEden = size_t{32} << 20;

const char* CauseName(GcCause cause) {
  switch (cause) {
    case GcCause::kAllocationFailure:
      return "allocation failure";
    case GcCause::kExplicit:
      return "explicit";
    case GcCause::kStress:
      return "gc stress";
    case GcCause::kOldTarget:
      return "old generation target";
  }
  return "unknown";
}

std::string Mib(size_t n) { return absl::StrFormat("%.1fM", n / 1048576.0); }

}  // namespace

size_t OldTargetAfterFull(size_t live_bytes, size_t capacity) {
  return std::min(capacity, std::max(kMinOldTarget, 2 * live_bytes));
}

size_t InitialEdenCapacity(size_t eden_reserved) { return std::min(eden_reserved, kInitialEden); }

size_t EdenCapacityAfterMinor(size_t eden_capacity, size_t eden_used, size_t collected,
                              size_t survived, size_t eden_reserved) {
  if (eden_used < eden_capacity / 2 || survived <= collected / 8) return eden_capacity;
  const size_t want = std::max(2 * eden_capacity, (8 * survived + kPageSize - 1) & ~(kPageSize - 1));
  return std::min(eden_reserved, want);
}

void GenerationalHeap::VisitAllRoots(RootVisitor& visitor) {
  vm_->VisitGlobalRoots(visitor);
  for (Mutator* m : safepoints_.mutators()) {
    vm_->VisitMutatorRoots(m, visitor);
    if (visitor.WantsRootInfo()) visitor.SetRootInfo(RootInfo{});
    visitor.VisitRoot(&MutatorData::Of(m)->sample_root);  // a sample being reported
    // An allocation whose collections' events are being delivered
    // (generational_heap.cc).
    visitor.VisitRoot(&MutatorData::Of(m)->deferred_root);
  }
}

bool GenerationalHeap::PromotionGuaranteed() const {
  const double worst_pages =
      static_cast<double>(young_->used()) * WorstCaseExpansion() / kPageSize + kNumSizeClasses;
  return worst_pages <= static_cast<double>(old_->free_pages());
}

GenerationalHeap::GcKind GenerationalHeap::Collect(Mutator* requester, GcCause cause, GcKind kind,
                                                   size_t alloc_size, uintptr_t* allocation) {
  if (!safepoints_.Begin(requester)) return GcKind::kNone;
  const auto start = std::chrono::steady_clock::now();
  const size_t before = UsedBytes();
  if (options_.verify_heap) Verify("before collection");

  for (Mutator* m : safepoints_.mutators()) RetireTlab(m);
  const size_t eden_used = young_->eden_used();
  GcObserver* const gc_observer = gc_observer_.load(std::memory_order_acquire);
  if (gc_observer != nullptr) gc_observer->OnGcStart();
  std::vector<WeakEvent> events;
  bool report;
  {
    base::MutexLock lock(&observer_mu_);
    report = observer_ != nullptr;
  }
  uint64_t promoted = 0;
  {
    base::MutexLock lock(&old_mu_);
    if (kind == GcKind::kMinor && !PromotionGuaranteed()) {
      kind = GcKind::kFull;
    } else if (kind == GcKind::kMinor && old_->used_bytes() > old_target_) {
      kind = GcKind::kFull;
      cause = GcCause::kOldTarget;  // what --verbose:gc says
    }
    const size_t old_before = old_->used_bytes();
    if (kind == GcKind::kMinor) {
      MinorCollection(report ? &events : nullptr);
    } else {
      FullCollection(report ? &events : nullptr);
    }
    if (old_->used_bytes() > old_before) promoted = old_->used_bytes() - old_before;
  }
  // After the collection: TLAB sizes follow eden's new capacity (.eden-sizing).
  for (Mutator* m : safepoints_.mutators()) {
    MutatorData::Of(m)->tlab_sizer.OnCollection(eden_used, young_->eden_capacity());
  }
  if (options_.verify_heap) Verify("after collection");
  collections_.fetch_add(1, std::memory_order_release);
  if (gc_observer != nullptr) gc_observer->OnGcFinish();
  if (allocation != nullptr) {
    *allocation = TryAllocate(requester, alloc_size, /*within_target=*/kind != GcKind::kFull);
  }

  const uint64_t pause_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  const size_t after = UsedBytes();
  {
    base::MutexLock lock(&stats_mu_);
    ++(kind == GcKind::kMinor ? stats_.minor_collections : stats_.full_collections);
    stats_.total_pause_ns += pause_ns;
    stats_.max_pause_ns = std::max(stats_.max_pause_ns, pause_ns);
    if (kind == GcKind::kMinor) stats_.bytes_promoted += promoted;
    stats_.heap_used_bytes = after;
    stats_.tenuring_threshold = tenuring_threshold_;
  }
  if (options_.verbose_gc && options_.gc_log != nullptr) {
    absl::FPrintF(options_.gc_log, "[gc] %s (%s) %s->%s (%s) %.3fms\n",
                  kind == GcKind::kMinor ? "minor" : "full", CauseName(cause), Mib(before),
                  Mib(after), Mib(size_), pause_ns / 1e6);
    std::fflush(options_.gc_log);
  }
  // The observer takes the events while the world is still stopped
  // (gc/weak_table.h, .delivery): whatever happens to this thread after the
  // pause, they are where VM death can find them.
  bool found = false;
  if (!events.empty()) {
    base::MutexLock lock(&observer_mu_);
    if (observer_ != nullptr) {
      observer_->OnWeakEventsFound(events);
      found = true;
    }
  }
  safepoints_.End(requester);
  // A collection with no allocation waiting on it delivers its
  // ObjectFree/ObjectPromote events before it returns, so that an agent
  // that forced it sees its results. An allocation holds a raw pointer:
  // AllocateSlowPath delivers them once the object is in a root (callbacks
  // run native, and other threads may collect meanwhile).
  if (!found) return kind;
  if (allocation != nullptr) {
    MutatorData::Of(requester)->events_found = true;
  } else {
    DeliverFoundWeakEvents();
  }
  return kind;
}

void GenerationalHeap::MinorCollection(std::vector<WeakEvent>* events) {
  // Survivors of eden are not told apart from the from-survivor's, so the
  // survival rate is over both.
  const size_t collected = young_->used();
  const size_t eden_used = young_->eden_used();
  Scavenger scavenger(*young_, *old_, cards_, tenuring_threshold_, /*promote_all=*/false);
  VisitAllRoots(scavenger);
  scavenger.ScanDirtyCards();
  scavenger.Drain();
  weak_.Process(WeakTable::Scope::kYoung,
                [&](Object* o, WeakTable::Fate* f) { return scavenger.WeakFate(o, f); }, events);
  young_->FinishScavenge();
  UpdateTenuringThreshold(scavenger.age_bytes());
  if (options_.young_bytes == 0) {  // .eden-sizing
    const size_t survived = young_->from().used() + scavenger.promoted_bytes();
    young_->SetEdenCapacity(EdenCapacityAfterMinor(young_->eden_capacity(), eden_used, collected,
                                                   survived, young_->eden_reserved()));
  }
}

void GenerationalHeap::FullCollection(std::vector<WeakEvent>* events) {
  Marker marker(*young_);
  VisitAllRoots(marker);
  marker.Drain();
  weak_.Process(
      WeakTable::Scope::kAll,
      [](Object* o, WeakTable::Fate* f) {
        if (Marker::IsMarked(o)) return false;
        *f = {WeakEventKind::kDied, nullptr};
        return true;
      },
      events);
  old_->Sweep();
  if (old_->CanFit(marker.young_class_counts())) {
    Scavenger scavenger(*young_, *old_, cards_, 0, /*promote_all=*/true);
    VisitAllRoots(scavenger);
    scavenger.ScanDirtyCards();
    scavenger.Drain();
    weak_.Process(WeakTable::Scope::kYoung,
                  [&](Object* o, WeakTable::Fate* f) { return scavenger.WeakFate(o, f); },
                  events);
    young_->ResetAll();
    // Deaths were found while marking, promotions now: report each
    // collection's events in slot order all the same.
    if (events != nullptr) {
      std::stable_sort(events->begin(), events->end(),
                       [](const WeakEvent& a, const WeakEvent& b) { return a.slot < b.slot; });
    }
    {
      base::MutexLock lock(&stats_mu_);
      stats_.bytes_promoted += scavenger.promoted_bytes();
    }
  } else {
    // The old generation cannot take every young survivor: leave them in
    // place (cards for their old->young edges are still dirty) and let the
    // allocation that triggered this report exhaustion.
    for (Object* o : marker.young_marked()) o->gc_word &= ~gc_word::kMarked;
  }
  // .occupancy; the young survivors just promoted are live, so they count.
  old_target_ = OldTargetAfterFull(old_->used_bytes(), old_->capacity());
}

void GenerationalHeap::UpdateTenuringThreshold(
    const std::array<uint64_t, gc_word::kMaxAge + 1>& age_bytes) {
  const uint64_t desired = static_cast<uint64_t>(young_->to().capacity() * kTargetSurvivorRatio);
  uint64_t total = 0;
  uint32_t age = 1;
  for (; age <= gc_word::kMaxAge; ++age) {
    total += age_bytes[age];
    if (total > desired) break;
  }
  tenuring_threshold_ = std::min({age, options_.max_tenuring_threshold, gc_word::kMaxAge});
}

bool GenerationalHeap::CollectGarbage(Mutator* requester, GcCause cause) {
  while (Collect(requester, cause, GcKind::kFull) == GcKind::kNone) {
    if (safepoints_.stopped_for_good()) return false;  // the VM is dying
  }
  return true;
}

void GenerationalHeap::RunAtSafepoint(Mutator* requester, absl::FunctionRef<void(Mutator*)> fn) {
  while (!safepoints_.Begin(requester)) {
    if (safepoints_.stopped_for_good()) return;  // the VM is dying
  }
  for (Mutator* m : safepoints_.mutators()) fn(m);
  safepoints_.End(requester);
}

bool GenerationalHeap::StopWorld() {
  if (safepoints_.OwnedByCallingThread()) return false;
  while (!safepoints_.Begin(nullptr)) {
    if (safepoints_.stopped_for_good()) return false;
  }
  return true;
}

void GenerationalHeap::ResumeWorld() { safepoints_.End(nullptr); }

bool GenerationalHeap::SafepointOwnedByCallingThread() const {
  return safepoints_.OwnedByCallingThread();
}

std::vector<SpaceUsage> GenerationalHeap::SpaceUsages(Mutator* requester) {
  std::vector<SpaceUsage> spaces;
  while (!safepoints_.Begin(requester)) {
    if (safepoints_.stopped_for_good()) return spaces;
  }
  spaces.push_back({"eden", young_->eden_used(), young_->eden_capacity()});
  spaces.push_back({"survivor", young_->from().used(), young_->from().capacity()});
  spaces.push_back({"old", old_->used_bytes(), old_->capacity()});
  safepoints_.End(requester);
  return spaces;
}

void GenerationalHeap::VerifyNow(Mutator* requester) {
  while (!safepoints_.Begin(requester)) {
    if (safepoints_.stopped_for_good()) return;
  }
  Verify("on request");
  safepoints_.End(requester);
}

// Each collecting thread delivers its own collections' events (weak_table.h,
// .delivery): no queue shared between threads, so an observer blocked
// on one thread holds up no other thread's collection or delivery. Ordering
// per slot is the observer's, by WeakEvent::seq.
void GenerationalHeap::DeliverFoundWeakEvents() {
  WeakObserver* observer;
  {
    base::MutexLock lock(&observer_mu_);
    observer = observer_;
  }
  if (observer != nullptr) observer->DeliverFoundWeakEvents();
}

}  // namespace minivm::gc
