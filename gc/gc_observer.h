// Observer interfaces through which the heap reports to the agent API
// without knowing it exists (gc/ never includes agent_api/).
#ifndef MINIVM_GC_GC_OBSERVER_H_
#define MINIVM_GC_GC_OBSERVER_H_

#include "gc/object.h"
#include "gc/sampler.h"

namespace minivm::gc {

struct Mutator;

// Where an object was allocated.
enum class Generation { kYoung, kOld };

// How one thread samples: at all, and at which mean interval in bytes (0
// samples every allocation).
struct SamplingSettings {
  bool enabled = false;
  int32_t interval = kDefaultSamplingInterval;
};

// The sampler's one outlet (called at exactly one place: the end of the
// allocation slow path).
class SampleObserver {
 public:
  virtual ~SampleObserver() = default;
  // Thread m's sampling settings, which the observer owns (the heap keeps no
  // copy): with observers at several intervals, the finest one (sampler.h
  // .thin). Consulted when a thread attaches and at every
  // Heap::ReconfigureSampling, inside its safepoint.
  virtual SamplingSettings SamplingFor(Mutator* m) = 0;
  // A sample point fell inside a new object. On the allocating thread, after
  // the object is fully initialised. *object_root is a GC root for the whole
  // call and is updated if a collection moves the object (the observer may
  // force collections); the thread's sampler is suspended meanwhile.
  // `thinner` is the thread's, for the decisions at coarser intervals.
  virtual void OnSampledAllocation(Mutator* m, Value* object_root,
                                   const SampleDecision& decision, Generation generation,
                                   SampleThinner& thinner) = 0;
};

// Collection start and finish, inside the pause, on the collecting thread.
// Implementations must not touch the heap or block on mutators.
class GcObserver {
 public:
  virtual ~GcObserver() = default;
  virtual void OnGcStart() = 0;
  virtual void OnGcFinish() = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_GC_OBSERVER_H_
