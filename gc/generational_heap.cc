// The generational heap (gc/generational_heap.h): reservation, options,
// thread attachment, the allocation slow path and the sampler's arming. The
// collection plan is in collection.cc.
//
// Design of the slow path (AllocateSlowPath, declared in gc/allocation.h),
// the single place for refills, outside-TLAB and large allocations,
// collections, --gc-stress and sampling:
//
// .poll  It is a poll site: a pending safepoint is honoured first.
//
// .refuse  Requests that cannot fit even in an empty heap return nullptr at
//   once.
//
// .zeroing  Memory is zeroed by the thread that allocates it, one object at
//   a time: here, at the one point where the slow path initialises the
//   object it placed (in a TLAB, outside one, or large; .init), and in
//   gc::Allocate and the JIT's copy of it for the fast path. A TLAB is not
//   cleared at refill (tlab.h .not-zeroed), and a pause never clears memory,
//   so it stays proportional to the survivors.
//
// .retry  On failure it collects (minor first for small objects, then
//   full), and the thread that collects allocates inside its own pause,
//   before any other thread resumes. Only when that fails right after a
//   full collection does it report exhaustion (nullptr), so a thread is
//   never starved into a false "heap exhausted" by threads that raced into
//   the space it freed. When another thread's collection ran while it
//   waited, it retries. Each round either allocates, or ends in its own full
//   collection, or waits for another thread's collection (which made
//   progress), so there is no endless GC loop.
//
// .init  The object is initialised (klass, length) at exactly one point,
//   right before the sampler's one call site; every return leaves the TLAB
//   invariants (tlab.h .invariants) intact, with current_end lowered to the
//   next sample point when the thread samples (gc/sampler.h .arm).
//
// .sampler  The sampler's bookkeeping is two scopes and two calls
//   (gc/sampler.h .scopes). The slow path opens a SlowPathScope on entry,
//   before anything moves the TLAB, accounts the object through it, and
//   closes it before any callback runs, so the TLAB is armed whenever an
//   agent or another thread's collection can see it. RetireTlab (refills,
//   collections, detach) calls OnTlabRetired. ReportSample runs the sample
//   callback inside a SuspensionScope. RearmSampler (attach and
//   ReconfigureSampling) calls Reconfigure. Nothing else touches the
//   sampler.
//
// .deferred-events  The weak events (ObjectFree/ObjectPromote) of
//   collections the slow path ran are delivered last, with the new object
//   in a root (DeliverDeferredEvents): their callbacks run in native state,
//   so other threads may collect meanwhile, and raw memory must not be held
//   across.
#include "gc/generational_heap.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "gc/allocation.h"
#include "gc/check.h"
#include "gc/mutator_data.h"
#include "gc/size_classes.h"

namespace minivm::gc {
namespace {

size_t RoundDownToPage(size_t n) { return n / kPageSize * kPageSize; }

std::string Mib(size_t n) { return absl::StrFormat("%.1fM", n / 1048576.0); }

}  // namespace

absl::StatusOr<std::unique_ptr<Heap>> Heap::Create(const HeapOptions& options, VmInterface* vm) {
  auto heap = GenerationalHeap::Make(options, vm);
  if (!heap.ok()) return heap.status();
  return std::unique_ptr<Heap>(std::move(*heap));
}

absl::StatusOr<std::unique_ptr<GenerationalHeap>> GenerationalHeap::Make(const HeapOptions& options,
                                                                         VmInterface* vm) {
  const size_t heap = RoundDownToPage(options.max_heap_bytes);
  if (options.max_heap_bytes < kMinHeapBytes) {
    return absl::InvalidArgumentError(absl::StrFormat("heap size %d is below the minimum of %s",
                                                      options.max_heap_bytes, Mib(kMinHeapBytes)));
  }
  if (options.young_bytes != 0 && options.young_bytes >= options.max_heap_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("young generation size %d must be smaller than the heap size %d",
                        options.young_bytes, options.max_heap_bytes));
  }
  const size_t young = RoundDownToPage(options.young_bytes != 0 ? options.young_bytes : heap / 3);
  if (young < kMinYoungBytes) {
    // The size the user gave (--young=1 is "1", not the 0 it rounds down
    // to); a default young generation is a third of the heap.
    return absl::InvalidArgumentError(absl::StrFormat(
        "young generation size %d is below the minimum of %s",
        options.young_bytes != 0 ? options.young_bytes : heap / 3, Mib(kMinYoungBytes)));
  }
  if (heap - young < kMinOldBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "heap size %d leaves %d bytes for the old generation after a young generation of %d; "
        "the minimum is %s",
        heap, heap - young, young, Mib(kMinOldBytes)));
  }
  if (vm == nullptr) return absl::InvalidArgumentError("the heap needs a VmInterface");
  void* base = mmap(nullptr, heap, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrFormat("cannot reserve a heap of %d bytes", heap));
  }
  std::unique_ptr<GenerationalHeap> h(
      new GenerationalHeap(options, vm, reinterpret_cast<uintptr_t>(base), heap, young));
  if (absl::Status s = h->cards_.Init(h->base_, heap); !s.ok()) return s;
  return h;
}

GenerationalHeap::GenerationalHeap(const HeapOptions& options, VmInterface* vm, uintptr_t base,
                                   size_t size, size_t young_bytes)
    : options_(options),
      vm_(vm),
      base_(base),
      size_(size),
      tenuring_threshold_(std::min(options.max_tenuring_threshold, gc_word::kMaxAge)) {
  // Survivors: a tenth of the young generation each (HotSpot's SurvivorRatio
  // of 8), at least one page.
  const size_t survivor = std::max(kPageSize, RoundDownToPage(young_bytes / 10));
  const size_t eden = young_bytes - 2 * survivor;
  // `--young` fixes eden's size; by default it starts small and grows
  // (collection.cc .eden-sizing).
  young_.emplace(base, eden, survivor,
                 options.young_bytes != 0 ? eden : InitialEdenCapacity(eden));
  old_.emplace(base + young_bytes, size - young_bytes);
  {
    base::MutexLock lock(&old_mu_);
    old_target_ = OldTargetAfterFull(0, old_->capacity());
  }
  base::MutexLock lock(&stats_mu_);
  stats_.heap_capacity_bytes = size;
  stats_.tenuring_threshold = tenuring_threshold_;
}

GenerationalHeap::~GenerationalHeap() { munmap(reinterpret_cast<void*>(base_), size_); }

void GenerationalHeap::AttachMutator(Mutator* m) {
  auto* data = new MutatorData;
  data->tlab_sizer.Init(young_->eden_capacity(), safepoints_.mutator_count() + 1);
  m->tlab = Tlab{};
  m->heap = this;
  m->card_table_biased = cards_.biased();
  m->gc_private = data;
  m->poll.store(0, std::memory_order_relaxed);
  if (options_.fixed_tlab_bytes != 0) data->tlab_sizer.SetFixed(options_.fixed_tlab_bytes);
  data->sampler.Seed(options_.sampler_seed, m->thread_index);
  data->thinner.Seed(options_.sampler_seed, m->thread_index);
  safepoints_.Attach(m);
  // Configured after Attach: any later reconfiguration sees this thread, and
  // none can run on it before it next polls.
  RearmSampler(m);
}

void GenerationalHeap::DetachMutator(Mutator* m) {
  // Retire first, while this thread is still running and registered: no
  // collection can be mid-pause now, so the TLAB is ours to account for.
  RetireTlab(m);
  safepoints_.Detach(m);
  delete MutatorData::Of(m);
  m->gc_private = nullptr;
  m->tlab = Tlab{};
}

// The unused tail of a retired TLAB holds stale bytes; one filler word over
// it keeps eden parsable (young_gen.h).
void GenerationalHeap::RetireTlab(Mutator* m) {
  if (m->tlab.top < m->tlab.end) {
    *reinterpret_cast<uint64_t*>(m->tlab.top) = FillerWord(m->tlab.end - m->tlab.top);
  }
  const size_t used = m->tlab.top - m->tlab.start;
  bytes_allocated_.fetch_add(used, std::memory_order_relaxed);
  MutatorData* data = MutatorData::Of(m);
  data->tlab_sizer.RecordAllocatedBytes(used);
  data->sampler.OnTlabRetired(m->tlab);  // charges what the fast path allocated in it
  m->tlab = Tlab{};
}

uintptr_t GenerationalHeap::TryAllocate(Mutator* m, size_t size, bool within_target,
                                        bool* over_target) {
  if (size > kLargeObjectThreshold) {
    Object* o;
    {
      base::MutexLock lock(&old_mu_);
      if (within_target && old_->used_bytes() + size > old_target_) {
        if (over_target != nullptr) *over_target = true;
        return 0;
      }
      o = old_->AllocateLarge(size);
    }
    if (o == nullptr) return 0;
    bytes_allocated_.fetch_add(size, std::memory_order_relaxed);
    large_objects_.fetch_add(1, std::memory_order_relaxed);
    return reinterpret_cast<uintptr_t>(o);
  }
  Tlab& t = m->tlab;
  if (size <= t.end - t.top) {  // only when current_end was lowered
    const uintptr_t p = t.top;
    t.top += size;
    return p;
  }
  TlabSizer& sizer = MutatorData::Of(m)->tlab_sizer;
  if (!sizer.ShouldAllocateOutside(t.end - t.top, size)) {
    RetireTlab(m);
    const size_t tlab_bytes = sizer.desired_bytes();
    if (const uintptr_t p = young_->AllocateEden(tlab_bytes); p != 0) {
      sizer.RecordRefill(tlab_bytes);
      t.start = p;
      t.top = p + size;
      t.end = p + tlab_bytes;
      t.current_end = t.end;
      return p;
    }
    // Eden cannot hold a whole TLAB: fall through and place just the object.
  }
  const uintptr_t p = young_->AllocateEden(size);
  if (p == 0) return 0;
  bytes_allocated_.fetch_add(size, std::memory_order_relaxed);
  sizer.RecordAllocatedBytes(size);
  return p;
}

// gc::Heap has one implementation, so the slow path reaches the
// GenerationalHeap behind m->heap directly, without a virtual hop.
Object* AllocateSlowPath(Mutator* m, const ClassLayout* cls, size_t size, uint64_t length) {
  MINIVM_GC_DCHECK(size >= kHeaderSize && size % kObjectAlignment == 0, "bad allocation size %d",
                   size);
  GenerationalHeap& heap = *static_cast<GenerationalHeap*>(m->heap);
  using GcKind = GenerationalHeap::GcKind;
  gc::SafepointPoll(m);
  Object* obj = nullptr;
  SampleDecision decision;
  {
    // Open before anything moves the TLAB; it arms the TLAB when it closes,
    // on every return, before any callback runs (gc/sampler.h .scopes).
    ThreadSampler::SlowPathScope sampling(MutatorData::Of(m)->sampler, m->tlab);
    // A request that no collection can satisfy fails at once.
    if (size > kMaxObjectSize || (size > kLargeObjectThreshold && size > heap.old_->capacity())) {
      return nullptr;
    }
    if (heap.options_.gc_stress_every != 0 &&
        (heap.stress_counter_.fetch_add(1, std::memory_order_relaxed) + 1) %
                heap.options_.gc_stress_every ==
            0) {
      heap.Collect(m, GcCause::kStress, GcKind::kMinor);
    }
    uintptr_t mem = 0;
    bool tried_minor = size > kLargeObjectThreshold;  // a minor GC cannot free old pages
    for (;;) {
      bool over_target = false;
      mem = heap.TryAllocate(m, size, /*within_target=*/true, &over_target);
      if (mem != 0) break;
      const GcKind ran =
          heap.Collect(m, over_target ? GcCause::kOldTarget : GcCause::kAllocationFailure,
                       tried_minor ? GcKind::kFull : GcKind::kMinor, size, &mem);
      if (mem != 0 || ran == GcKind::kFull) break;
      if (ran == GcKind::kMinor) tried_minor = true;
    }
    if (mem != 0) {
      // Zeroed here, once for every path, and outside any pause: TryAllocate
      // may have run inside the collection this thread just did (.zeroing).
      ZeroAllButKlass(mem, size);
      obj = reinterpret_cast<Object*>(mem);
      obj->klass = cls;
      if (cls->kind != LayoutKind::kFields) obj->set_length(length);

      // ---- The sampler's one call site (docs/sampling.md) ----
      // The object is fully initialised and reachable only from here; every
      // slow-path allocation (TLAB refill, outside-TLAB eden, large object)
      // passes this point exactly once.
      decision = sampling.Account(size);
    }
  }
  if (obj == nullptr) {  // heap exhausted
    if (MutatorData::Of(m)->events_found) heap.DeliverDeferredEvents(m, nullptr);
    return nullptr;
  }
  if (ABSL_PREDICT_FALSE(decision.sample_count != 0)) obj = heap.ReportSample(m, obj, decision);
  // After the sampler's bookkeeping: a collection that runs meanwhile
  // retires the TLAB, and this object must already be charged by then.
  if (ABSL_PREDICT_FALSE(MutatorData::Of(m)->events_found)) {
    obj = heap.DeliverDeferredEvents(m, obj);
  }
  MINIVM_GC_DCHECK(m->tlab.start <= m->tlab.top && m->tlab.top <= m->tlab.current_end &&
                       m->tlab.current_end <= m->tlab.end,
                   "TLAB invariant broken on return from the slow path");
  return obj;
}

// gc/sampler.h .rearm: a change of settings redraws every thread's gap and
// re-arms its TLAB, so it takes effect at each thread's next allocation.
void GenerationalHeap::ReconfigureSampling(Mutator* requester) {
  RunAtSafepoint(requester, [this](Mutator* m) { RearmSampler(m); });
}

void GenerationalHeap::RearmSampler(Mutator* m) {
  // The observer and its settings are read here, inside the pause (or at
  // attach): concurrent reconfigurations all end with the settings current
  // when the last one ran.
  SampleObserver* observer = sample_observer_.load(std::memory_order_acquire);
  ThreadSampler& sampler = MutatorData::Of(m)->sampler;
  if (observer != nullptr) {
    const SamplingSettings settings = observer->SamplingFor(m);
    sampler.Reconfigure(settings.enabled, settings.interval, m->tlab);
  } else {
    sampler.Reconfigure(false, kDefaultSamplingInterval, m->tlab);
  }
}

Object* GenerationalHeap::ReportSample(Mutator* m, Object* obj, const SampleDecision& decision) {
  SampleObserver* observer = sample_observer_.load(std::memory_order_acquire);
  if (observer == nullptr) return obj;
  MutatorData* data = MutatorData::Of(m);
  const Generation generation = InYoung(obj) ? Generation::kYoung : Generation::kOld;
  // The callback may collect (moving obj) or re-configure sampling; the
  // sampler is suspended so nothing it allocates is sampled or charged.
  data->sample_root = Value::Ref(obj);
  {
    ThreadSampler::SuspensionScope suspended(data->sampler, m->tlab);
    observer->OnSampledAllocation(m, &data->sample_root, decision, generation, data->thinner);
  }
  obj = data->sample_root.AsRef();
  data->sample_root = Value::Null();
  return obj;
}

Object* GenerationalHeap::DeliverDeferredEvents(Mutator* m, Object* obj) {
  MutatorData* data = MutatorData::Of(m);
  // Agents cannot allocate on the VM heap, so no allocation nests in here.
  MINIVM_GC_DCHECK(data->deferred_root.IsNull(), "nested deferred delivery");
  data->events_found = false;
  data->deferred_root = obj != nullptr ? Value::Ref(obj) : Value::Null();
  DeliverFoundWeakEvents();
  obj = obj != nullptr ? data->deferred_root.AsRef() : nullptr;
  data->deferred_root = Value::Null();
  return obj;
}

HeapStats GenerationalHeap::Stats() const {
  base::MutexLock lock(&stats_mu_);
  HeapStats s = stats_;
  s.bytes_allocated = bytes_allocated_.load(std::memory_order_relaxed);
  s.large_objects_allocated = large_objects_.load(std::memory_order_relaxed);
  return s;
}

void GenerationalHeap::SetWeakObserver(WeakObserver* observer) {
  base::MutexLock lock(&observer_mu_);
  observer_ = observer;
}

}  // namespace minivm::gc
