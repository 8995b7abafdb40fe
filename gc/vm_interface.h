// The one narrow interface through which the GC reaches the VM.
//
// gc/ never includes vm/ or agent_api/. Everything the GC needs from
// the runtime — where the roots are — comes through VmInterface, which the VM
// implements (vm/runtime/vm.cc) and tests mock (tests/unit/gc/).
#ifndef MINIVM_GC_VM_INTERFACE_H_
#define MINIVM_GC_VM_INTERFACE_H_

#include <cstdint>

#include "gc/object.h"

namespace minivm::gc {

struct Mutator;

// What a range of root slots is, for visitors that ask (the heap walker,
// gc/heap_walker.h, which reports each root with its kind). gc/ does not
// interpret `thread` and `method`: the VM fills them with its own handles.
enum class RootKind : uint8_t {
  kGlobal,     // a global variable; index = the variable of the range's first slot
  kStackSlot,  // a slot of one frame; slot = the frame slot of the range's first slot
  kOther,      // anything else the VM or a tool holds
};
struct RootInfo {
  RootKind kind = RootKind::kOther;
  int64_t index = 0;             // kGlobal
  const void* thread = nullptr;  // kStackSlot: the VM's thread
  int32_t depth = 0;             // kStackSlot: 0 = the innermost frame
  const void* method = nullptr;  // kStackSlot: the VM's function
  int64_t location = 0;          // kStackSlot: the frame's bytecode offset
  int32_t slot = 0;              // kStackSlot
};

// Visits root slots. The GC may rewrite each slot in place (a moved
// object's new address); a visitor is only ever called inside a pause.
class RootVisitor {
 public:
  virtual ~RootVisitor() = default;
  // Every slot in [begin, end) is a Value: an int, null or a reference.
  virtual void VisitRoots(Value* begin, Value* end) = 0;
  void VisitRoot(Value* slot) { VisitRoots(slot, slot + 1); }

  // A visitor that returns true here is told what each range is: the VM
  // calls SetRootInfo before every range it visits and splits stacks into
  // one range per frame. The collector's visitors keep the default (false),
  // so their scan stays one range per stack, with no bookkeeping.
  virtual bool WantsRootInfo() const { return false; }
  virtual void SetRootInfo(const RootInfo& /*info*/) {}
};

class VmInterface {
 public:
  virtual ~VmInterface() = default;

  // Roots not owned by any thread: globals, string constants, VM handles.
  // With visitor.WantsRootInfo(), globals are reported as kGlobal and the
  // rest as kOther.
  virtual void VisitGlobalRoots(RootVisitor& visitor) = 0;

  // The roots of one stopped mutator: its value stack up to its precise top
  // (but for slots the VM knows to hold no reference, which it may skip)
  // and anything else the thread holds (handles, pending results). With
  // visitor.WantsRootInfo(), each frame's slots are kStackSlot ranges, one
  // per run of slots visited.
  virtual void VisitMutatorRoots(Mutator* mutator, RootVisitor& visitor) = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_VM_INTERFACE_H_
