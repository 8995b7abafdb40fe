// Safepoint polls and tier-up: what compiled code does so that a thread
// reaches a safepoint in bounded time, and so that hot quick code moves to
// optimised code.
//
// Design:
// .poll.where  Compiled code polls at loop back-edges and at real calls (in
//    the caller, as the interpreter polls): an acquire load of the
//    thread's poll word and a cold call of the runtime. Function entry does
//    not poll: every way in is a CALL, which polled (or came after one that
//    did in the caller's activation), or the start of a thread. An inlined
//    body has no loops (inline_policy.h .inline.small) and its calls poll,
//    so its entry needs none either.
// .poll.once  Optimised code polls at a real call only if some path from
//    the activation's start, or from a loop header (where on-stack
//    replacement enters), reaches it without an earlier real call
//    (PollsAtCall, path_state.h .path.polled). A poll bounds the time a
//    thread takes to reach a safepoint; what could run unboundedly without
//    one is a loop, whose back-edge polls, or a recursion, which makes a
//    first real call in every activation. Between two polls a thread runs
//    at most one activation's straight-line code plus bounded callees. fib's
//    code polls at four of its eight real calls (an innermost copy's base
//    case returns without a call). Quick code polls at every call: it has
//    no path state worth the compile time. Rejected: a poll at every call
//    in optimised code (the interpreter's rule, and one load and branch per
//    call on the hottest paths), and polls at function entry (every entry
//    is a call that already polled).
// .poll.write-back  A poll's cold path is a GC point like any other
//    (frames.cc .frame.write-back): it writes the slots that are not home,
//    makes the frame t->fp, sets t->sp and the pc, calls the runtime and
//    reloads. A call's poll writes the arguments too (a collection there
//    must see them) and repeats the call's int mask, since the slots under
//    the arguments are as the call left them (frames.cc .frame.int-mask).
// .tier-up  Quick code (only) counts Function::hotness at entry and at every
//    loop back-edge as the interpreter does (a plain load and store; jit.cc
//    .tiers). At the threshold a cold block calls minivm_jit_hot (a GC
//    point: --jit-sync compiles there), which reports the function and
//    returns its optimised code once published; the activation then
//    continues there, on the same frame, at entry with entry 0 and the
//    arguments (calls.cc .call.signature), at a back-edge through the loop
//    header's OSR entry, as the interpreter's OSR does, and returns what
//    that code returns. Until then the runtime restarts the count, so
//    waiting costs one call per threshold events, not one per event. The
//    state and code checks stay out of line because this code is in every
//    eagerly compiled function. Nothing here depends on sampling; the
//    optimising tier emits none of it. Rejected: monotonic atomic
//    counters (fast instruction selection does not handle them and falls
//    back to SelectionDAG for the whole function); the checks inline (a
//    trivial function's quick compile grows by about half).
#include <vector>

#include "vm/jit/ir_generator_internal.h"
#include "vm/jit/polls.h"

namespace minivm::jit {

using enum RuntimeFunction;

void IrGenerator::EmitPoll(int n, uint32_t pc_off, int from, uint32_t pc_mask) {
  llvm::LoadInst* word = b_.CreateAlignedLoad(i32_, ByteOffset(thread_, kPollWord), llvm::Align(4));
  word->setAtomic(llvm::AtomicOrdering::Acquire);
  BasicBlock* slow = NewBlock("poll");
  BasicBlock* cont = NewBlock("polled");
  CondBrUnlikely(b_.CreateICmpNE(word, b_.getInt32(0)), slow, cont);
  b_.SetInsertPoint(slow);
  WriteInlinedFrame();
  StoreSlots(from, n);
  StoreField(frame_, thread_, kThreadFp, tbaa_thread_);
  StoreField(HomeAddr(n), thread_, kThreadSp, tbaa_thread_);
  SetPc(pc_off, pc_mask);  // a call's poll: the slots under it as the call left them
  b_.CreateCall(Rt(kPoll), {thread_});
  Reload(n, from);
  b_.CreateBr(cont);
  b_.SetInsertPoint(cont);
}

void IrGenerator::EmitTierUp(int n, uint32_t pc_off, uint32_t entry) {
  if (hot_threshold_ == 0) return;
  // Plain accesses, not monotonic atomics, which fast instruction selection
  // does not handle (it fell back to SelectionDAG for every function). A
  // racing read may see any value (LLVM's rule for races on plain accesses),
  // which only moves when the cold call happens; the call is safe at any
  // count, and nothing optimises this code but SROA, which leaves it alone.
  LValue* counter = ConstPtr(&fn_.hotness);
  LValue* hotness =
      b_.CreateAdd(b_.CreateAlignedLoad(i32_, counter, llvm::Align(4)), b_.getInt32(1));
  b_.CreateAlignedStore(hotness, counter, llvm::Align(4));
  BasicBlock* hot = NewBlock("hot");
  BasicBlock* cont = NewBlock("counted");
  CondBrUnlikely(b_.CreateICmpUGE(hotness, b_.getInt32(hot_threshold_)), hot, cont);

  b_.SetInsertPoint(hot);
  Spill(n, pc_off);
  LValue* code = b_.CreateCall(Rt(kHot), {thread_, ConstPtr(&fn_), llvm_fn_});
  Reload(n);
  BasicBlock* transfer = NewBlock("tier_up");
  b_.CreateCondBr(b_.CreateICmpEQ(code, llvm::ConstantPointerNull::get(ptr_)), cont, transfer);
  // The slots are home (written back above, and a collection in the call
  // updated them there), which is where an OSR entry reads them from; at
  // entry 0 the optimised code takes the arguments as any call passes them
  // (calls.cc .call.signature). Its result, or sentinel, is this activation's.
  b_.SetInsertPoint(transfer);
  std::vector<LValue*> args = {thread_, frame_, b_.getInt32(entry)};
  for (int i = 0; i < RegisterArgs(fn_.arity); ++i) {
    args.push_back(entry == 0 ? Get(i) : Const64(0));
  }
  // Through jit_code, so in the C convention, as quick code's own.
  b_.CreateRet(b_.CreateCall(llvm_fn_->getFunctionType(), code, args));
  b_.SetInsertPoint(cont);
}

void IrGenerator::EmitLoop(uint32_t off, int depth) {
  // The interpreter's pc at this poll is already the loop header.
  const uint32_t target = JumpTargetAt(off);
  static_assert(PollsAtBackEdge());
  EmitPoll(fn_.num_locals + depth, target, /*from=*/0);
  EmitTierUp(fn_.num_locals + depth, target, target + 1);
  b_.CreateBr(blocks_[target]);
}

}  // namespace minivm::jit
