// The heap's per-thread state, hung off Mutator::gc_private.
#ifndef MINIVM_GC_MUTATOR_DATA_H_
#define MINIVM_GC_MUTATOR_DATA_H_

#include "gc/mutator.h"
#include "gc/safepoint.h"
#include "gc/tlab_sizer.h"

namespace minivm::gc {

struct MutatorData {
  static MutatorData* Of(Mutator* m) { return static_cast<MutatorData*>(m->gc_private); }

  ThreadState state = ThreadState::kRunning;  // guarded by SafepointManager's mutex
  TlabSizer tlab_sizer;                       // the owning thread, or the collector in a pause
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_MUTATOR_DATA_H_
