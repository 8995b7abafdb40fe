// The heap's per-thread state, hung off Mutator::gc_private.
#ifndef MINIVM_GC_MUTATOR_DATA_H_
#define MINIVM_GC_MUTATOR_DATA_H_

#include <atomic>
#include <vector>

#include "gc/mutator.h"
#include "gc/object.h"
#include "gc/safepoint.h"
#include "gc/sampler.h"
#include "gc/tlab_sizer.h"
#include "gc/weak_table.h"

namespace minivm::gc {

struct MutatorData {
  static MutatorData* Of(Mutator* m) { return static_cast<MutatorData*>(m->gc_private); }

  // Written only by the owning thread; read by a safepoint owner. Atomic:
  // the transitions to and from kNative/kBlocked are lock-free unless a
  // safepoint is active (SafepointManager::SetState).
  std::atomic<SafepointState> state{SafepointState::kRunning};
  TlabSizer tlab_sizer;                       // the owning thread, or the GC in a pause
  // The owning thread, or a safepoint owner while the thread is stopped.
  ThreadSampler sampler;
  SampleThinner thinner;  // the sampler's decisions at observers' intervals (.thin)
  // Holds a sampled object while observers run: a root (VisitAllRoots),
  // updated if a collection moves the object.
  Value sample_root;
  // Set when a collection an allocation ran found weak events (the observer
  // holds them): AllocateSlowPath has them delivered once the new object is
  // initialised and held in deferred_root (a root, like sample_root).
  // Delivering them in the middle of the allocation would leave the raw
  // memory unrooted while callbacks run in native state and other threads
  // collect. The owning thread only.
  bool events_found = false;
  Value deferred_root;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_MUTATOR_DATA_H_
