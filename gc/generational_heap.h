// The generational heap: the Heap implementation (heap.h), split by concern:
//   generational_heap.cc  reservation, options, attach/detach, the allocation
//                 slow path, the sampler's arming
//   collection.cc  the collection plan: pauses, minor vs full, tenuring, logging
//   verifier.cc   --verify-heap
// Spaces, evacuation, marking, safepoints and weak slots live in their own
// files (young_gen, old_space, card_table, scavenger, marker, safepoint,
// weak_table, tlab_sizer). Reservation layout (docs/gc.md):
//
//   base                                                              limit
//   | eden | survivor 0 | survivor 1 | old: size-class pages + LOS runs     |
//   |<-------- young_bytes -------->|<------ max_heap - young_bytes ------>|
//   one card table byte per 512 bytes of all of it
//
// Tests include this header to look inside (spaces, thresholds, Verify).
#ifndef MINIVM_GC_GENERATIONAL_HEAP_H_
#define MINIVM_GC_GENERATIONAL_HEAP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "base/sync.h"
#include "gc/allocation.h"
#include "gc/card_table.h"
#include "gc/heap.h"
#include "gc/old_space.h"
#include "gc/safepoint.h"
#include "gc/weak_table.h"
#include "gc/young_gen.h"

namespace minivm::gc {

// The old generation's occupancy target after a full collection that left
// `live_bytes` in it (collection.cc .occupancy).
size_t OldTargetAfterFull(size_t live_bytes, size_t capacity);

// Eden's starting capacity when `--young` is not given, and the capacity
// after a minor collection that found `eden_used` bytes in eden (of
// `eden_capacity`), collected `collected` bytes in all and kept `survived`
// of them (collection.cc .eden-sizing).
size_t InitialEdenCapacity(size_t eden_reserved);
size_t EdenCapacityAfterMinor(size_t eden_capacity, size_t eden_used, size_t collected,
                              size_t survived, size_t eden_reserved);

class GenerationalHeap final : public Heap {
 public:
  enum class GcKind { kNone, kMinor, kFull };

  static absl::StatusOr<std::unique_ptr<GenerationalHeap>> Make(const HeapOptions& options,
                                                                VmInterface* vm);
  ~GenerationalHeap() override;

  void AttachMutator(Mutator* m) override;
  void DetachMutator(Mutator* m) override;
  bool CollectGarbage(Mutator* requester, GcCause cause) override;
  void SafepointPoll(Mutator* m) override { safepoints_.Poll(m); }
  SafepointState SetSafepointState(Mutator* m, SafepointState to) override {
    return safepoints_.SetState(m, to);
  }
  bool Contains(const void* p) const override {
    return reinterpret_cast<uintptr_t>(p) - base_ < size_;
  }
  HeapStats Stats() const override;
  std::vector<SpaceUsage> SpaceUsages(Mutator* requester) override;
  void RunAtSafepoint(Mutator* requester, absl::FunctionRef<void(Mutator*)> fn) override;
  bool StopWorld() override;
  void ResumeWorld() override;
  bool SafepointOwnedByCallingThread() const override;
  std::optional<HeapWalkStats> WalkHeap(Mutator* requester, const Value* start_slot,
                                        HeapWalkVisitor& visitor) override;  // heap_walker.cc
  WeakTable& weak_table() override { return weak_; }
  void SetWeakObserver(WeakObserver* observer) override;
  void SetSampleObserver(SampleObserver* observer) override {
    sample_observer_.store(observer, std::memory_order_release);
  }
  void ReconfigureSampling(Mutator* requester) override;
  void SetGcObserver(GcObserver* observer) override {
    gc_observer_.store(observer, std::memory_order_release);
  }
  bool IsYoung(const Object* obj) const override { return InYoung(obj); }
  uint64_t CollectionCount() const override {
    return collections_.load(std::memory_order_acquire);
  }
  void StopMutatorsForExit(Mutator* requester) override {
    safepoints_.BeginPermanent(requester);
  }

  // One collection of the given kind (a minor one may be upgraded to full by
  // the promotion guarantee). Returns what ran, kNone if another thread's
  // collection ran instead while this one waited. With `allocation`, the
  // requester's allocation of `alloc_size` bytes is attempted inside the same
  // pause, before any other thread resumes (0 if it did not fit): otherwise
  // the threads released by the pause could use up the space it freed before
  // the requester retries, and it would report a false exhaustion.
  GcKind Collect(Mutator* requester, GcCause cause, GcKind kind, size_t alloc_size = 0,
                 uintptr_t* allocation = nullptr);

  // Introspection (tests, verifier). Meaningful while the world is stopped
  // or the caller is the only mutator.
  bool InYoung(const void* p) const { return young_->Contains(reinterpret_cast<uintptr_t>(p)); }
  bool InEden(const void* p) const { return young_->InEden(reinterpret_cast<uintptr_t>(p)); }
  bool InSurvivor(const void* p) const {
    return young_->Contains(reinterpret_cast<uintptr_t>(p)) && !InEden(p);
  }
  bool InOld(const void* p) const { return old_->Contains(reinterpret_cast<uintptr_t>(p)); }
  bool IsCardDirty(const void* p) const { return cards_.IsDirty(reinterpret_cast<uintptr_t>(p)); }
  const YoungGen& young() const { return *young_; }
  const OldSpace& old_space() const { return *old_; }
  uint32_t tenuring_threshold() const { return tenuring_threshold_; }
  const HeapOptions& options() const { return options_; }
  // Stops the world and runs the verifier (CHECK-fails on a violation).
  void VerifyNow(Mutator* requester);

 private:
  // The slow path is a free function (the JIT calls it by address) with the
  // heap's internals at hand.
  friend Object* AllocateSlowPath(Mutator* m, const ClassLayout* cls, size_t size, uint64_t length);

  GenerationalHeap(const HeapOptions& options, VmInterface* vm, uintptr_t base, size_t size,
                   size_t young_bytes);

  // Configures m's sampler from the observer's current settings and re-arms
  // its TLAB: the one re-arming sequence, at attach and at every
  // reconfiguration. On m's thread, or with m stopped at a safepoint.
  void RearmSampler(Mutator* m);
  // Places `size` bytes (not zeroed: AllocateSlowPath zeroes the object).
  // `within_target`: a large object that would take the old generation past
  // old_target_ is refused (0, and *over_target set), so that the caller
  // collects first (collection.cc .occupancy). False right after a full
  // collection.
  uintptr_t TryAllocate(Mutator* m, size_t size, bool within_target,
                        bool* over_target = nullptr);
  // Posts a sampled allocation to the observer; returns the object's
  // (possibly new) address. Out of line: samples are rare.
  Object* ReportSample(Mutator* m, Object* obj, const SampleDecision& decision);
  // Delivers the weak events of collections the allocation slow path ran,
  // with the new object (null: none) held in a root meanwhile.
  Object* DeliverDeferredEvents(Mutator* m, Object* obj);
  void RetireTlab(Mutator* m);
  bool PromotionGuaranteed() const;
  void MinorCollection(std::vector<WeakEvent>* events);
  void FullCollection(std::vector<WeakEvent>* events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(old_mu_);
  void VisitAllRoots(RootVisitor& visitor);
  void UpdateTenuringThreshold(const std::array<uint64_t, gc_word::kMaxAge + 1>& age_bytes);
  void Verify(const char* when);
  // Has the weak observer deliver what this thread's collections found.
  void DeliverFoundWeakEvents();
  size_t UsedBytes() const { return young_->used() + old_->used_bytes(); }

  const HeapOptions options_;
  VmInterface* const vm_;
  const uintptr_t base_;
  const size_t size_;
  CardTable cards_;
  std::optional<YoungGen> young_;
  std::optional<OldSpace> old_;
  // Guards old_ against mutators' large-object allocation; the GC
  // takes it for the whole pause.
  base::Mutex old_mu_;
  SafepointManager safepoints_;
  WeakTable weak_;

  // GC state: touched only by the safepoint owner.
  uint32_t tenuring_threshold_;
  // The old generation's occupancy target (collection.cc .occupancy): set by
  // each full collection, read by the collection plan and by large-object
  // allocation, both under old_mu_.
  size_t old_target_ ABSL_GUARDED_BY(old_mu_);

  std::atomic<uint64_t> bytes_allocated_{0};
  std::atomic<uint64_t> large_objects_{0};
  std::atomic<uint64_t> stress_counter_{0};
  std::atomic<uint64_t> collections_{0};
  std::atomic<SampleObserver*> sample_observer_{nullptr};
  std::atomic<GcObserver*> gc_observer_{nullptr};
  mutable base::Mutex stats_mu_;
  HeapStats stats_ ABSL_GUARDED_BY(stats_mu_);

  base::Mutex observer_mu_;
  WeakObserver* observer_ ABSL_GUARDED_BY(observer_mu_) = nullptr;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_GENERATIONAL_HEAP_H_
