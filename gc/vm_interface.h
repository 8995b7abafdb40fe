// The one narrow interface through which the GC reaches the VM.
//
// gc/ never includes vm/ or agent_api/. Everything the GC needs from
// the runtime — where the roots are — comes through VmInterface, which the VM
// implements (vm/runtime/vm.cc) and tests mock (tests/unit/gc/).
#ifndef MINIVM_GC_VM_INTERFACE_H_
#define MINIVM_GC_VM_INTERFACE_H_

#include "gc/object.h"

namespace minivm::gc {

struct Mutator;

// Visits root slots. The GC may rewrite each slot in place (a moved
// object's new address); a visitor is only ever called inside a pause.
class RootVisitor {
 public:
  virtual ~RootVisitor() = default;
  // Every slot in [begin, end) is a Value: an int, null or a reference.
  virtual void VisitRoots(Value* begin, Value* end) = 0;
  void VisitRoot(Value* slot) { VisitRoots(slot, slot + 1); }
};

class VmInterface {
 public:
  virtual ~VmInterface() = default;

  // Roots not owned by any thread: globals, string constants, VM handles.
  virtual void VisitGlobalRoots(RootVisitor& visitor) = 0;

  // The roots of one stopped mutator: its value stack up to its precise top
  // and anything else the thread holds (handles, pending results).
  virtual void VisitMutatorRoots(Mutator* mutator, RootVisitor& visitor) = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_VM_INTERFACE_H_
