// What a path through a compiled body knows about each slot, and how two
// paths' knowledge meets. Pure data: no LLVM, so it is tested on its own.
//
// Design:
// .path.flow  The generator emits a body in one pass in bytecode order
//    (IrGenerator::EmitInstructions) and carries one PathState along it:
//    what holds on every path from the activation's start, or from a loop
//    header, to the instruction being emitted. Every edge but LOOP's goes
//    forward (the verifier checks it), so a jump target has seen every
//    edge into it but the back-edges before it is emitted: its state is the
//    meet of the jumps into it and the fall-through (Meet). A loop header
//    is also an on-stack-replacement entry and the target of a back-edge
//    not yet emitted, so nothing is known there (Reset), and one pass
//    suffices.
// .path.meet  A fact survives a join only if every path in knew it: the
//    meet of "known" and "unknown" is unknown, and a slot's source local
//    (copy_of) survives only if every path loaded it from the same local.
// .path.forget  Every write of a slot but a reload forgets all it knew
//    (Forget): its new value is unknown, not home, and no operand slot is
//    a copy of a local that was overwritten. Slots above the stack depth
//    are dead and forgotten before each instruction.
// .path.home  What is home already is not written again. A GC point writes
//    back only the slots whose home does not hold their value
//    (frames.cc .frame.write-back): a call's write-back, and its reload
//    after the return, leave the caller's slots below the arguments home
//    until the code writes them again. An inlined body's frame gets its
//    function and base at its first GC point on each path (frame_written).
//    A slow path's reload leaves the state as it is: on that path home and
//    value agree again, on the others they are as the state says.
// .path.int  What a path has proven about a value is kept. Every operator
//    but ADD goes on only with int operands (operators.cc
//    .op.raise-only; DIV and MOD come back from their slow path only with
//    ints too), so after one both operands and the result are ints, and so
//    is the local an operand was loaded from while it keeps that value
//    (ProveInt through copy_of; PUSH_INT, comparisons, EQ, NE and NOT give
//    ints too). An operator on two such slots is its fast path alone, and a
//    reload after a GC point skips them: no collection moves an int, and
//    nothing else writes a caller's slots. Where a runtime call leaves a
//    result in a slot's home (a built-in, a slow ADD, DIV or MOD, an index),
//    the slot is forgotten before the reload. An inlined body starts with
//    what its caller knew of the arguments.
// .path.ref  What a path knows of objects, as .path.int knows ints. A field
//    access that gets past its slow path found an object with that field
//    (ResolveField raises for null, an int or an object without it), so the
//    operand and the local it was loaded from hold an object from there on
//    (ProveRef), and a later field access through that local goes straight
//    to the class test, without the null and int test. A collection moves
//    the object but leaves it an object.
// .path.polled  Whether a real call, which polled, was made on every path
//    (polls.cc .poll.once). An inlined body starts with its caller's value
//    (the same activation) and an inlined call leaves it unchanged.
#ifndef MINIVM_VM_JIT_PATH_STATE_H_
#define MINIVM_VM_JIT_PATH_STATE_H_

#include <cstddef>
#include <vector>

namespace minivm::jit {

struct PathState {
  bool polled = false;         // .path.polled
  bool frame_written = false;  // an inlined body's frame has its function and base (.path.home)
  std::vector<bool> home;      // by slot: its home holds its value (.path.home)
  std::vector<bool> is_int;    // by slot: its value is an int (.path.int)
  std::vector<bool> is_ref;    // by slot: its value is an object, not null (.path.ref)
  std::vector<int> copy_of;    // by operand slot: the local it was loaded from, or -1

  // .path.meet: keeps what both paths know.
  void Meet(const PathState& other);
  // Nothing known of `slots` slots (a function's start, a loop header).
  void Reset(size_t slots);
  // .path.forget: the slot was written; nothing is known of its new value.
  // Locals are slots [0, num_locals), operands the rest.
  void Forget(int slot, int num_locals);
  // .path.int: the slot's value is an int on every path on from here, and
  // so is the local's it was loaded from.
  void ProveInt(int slot);
  // .path.ref: likewise, an object.
  void ProveRef(int slot);
};

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_PATH_STATE_H_
