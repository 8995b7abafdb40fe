// Frames, write-back and reload: how compiled code keeps the runtime's view
// of its activation (the Frame records and value-stack slots of
// vm/runtime/thread.h) exact wherever the runtime can look.
//
// Design:
// .frame.write-back  A slot's home is its value-stack slot; between GC points
//    its value lives in a register (ir_generator.cc .slots.registers). A GC
//    point is any call into the runtime that may allocate, collect, stop at
//    a safepoint, run an agent callback, walk the stack or raise. Before
//    one, compiled code writes home the slots below the instruction's
//    stack depth (Spill) and frame->pc; after it, it reloads them (Reload).
//    Only the slots whose homes do not hold their values are written, and
//    the ints are not reloaded (path_state.h .path.home, .path.int).
// .frame.lazy  t->fp and t->sp are written at GC points only (both tiers).
//    Nothing reads a thread's fp and sp but that thread at a GC point, or
//    another thread while it is stopped at one: a collection's roots, stack
//    traces, an error's report, an agent's stack walk. So every GC point but
//    a call makes its own frame t->fp and sets t->sp (Spill, EmitPoll), and
//    a call, real or inlined, writes only the caller's slots and pc and the
//    callee's function and base: where the stack ends is the callee's to
//    say, at its own GC points (compiled code), or the interpreter's, which
//    keeps both exact (minivm_jit_call_interpreted makes the frame t->fp).
//    After a return, t->fp may still name a frame above the caller's until
//    the caller's next GC point; nothing reads it there. An error leaves
//    the raising frame as t->fp all the way up, for the report's trace, and
//    whoever calls compiled code from C++ (RunCompiled's callers) sets both
//    when it returns. Rejected: t->fp and t->sp kept exact at every call and
//    return, as the interpreter keeps them (three stores per real call and
//    one per inlined return, for readers that only look at GC points).
// .frame.inlined  An inlined callee's Frame (calls.cc .inline) is written
//    at its first GC point on each path: its function and base
//    (WriteInlinedFrame), its pc, and t->fp. The caller wrote its own slots
//    and pc at the call. So a collection, a stack trace and an error's
//    trace see exactly the frames of the uninlined call.
// .frame.int-mask  Proven ints are not written home at calls (both tiers).
//    A home exists for the collector (and for the interpreter, should it
//    take the activation over), and the collector needs nothing of an int.
//    So a call's write-back (Spill with at_call, real or inlined) leaves out
//    the slots under its arguments that the path proves to be ints and
//    whose homes do not hold them already, among the frame's first
//    kMaskSlots (IntMaskAtCall), and names them in the top 16 bits of the pc
//    word it writes (vm/runtime/thread.h, Frame::pc_word):
//    VM::VisitMutatorRoots skips those homes, which may hold anything, a
//    stale reference from an earlier deeper frame included. They stay "not
//    home", so every later write-back that is not a call's writes them: a
//    slow path's, a poll's away from a call, and the interpreter's
//    hand-over, which also writes what each inlined caller's call left out
//    (WriteOuterFramesBack). The mask holds for the frame while it is at
//    that instruction whichever tier runs it (the slots are ints on every
//    path there), and each GC point after it writes the pc word again.
//    Rejected: writing every slot at every call (fib's n and its first
//    call's result stored at every call, for a collector that skips ints).
// .frame.base  The base is read again after a call (optimised tier). Every
//    slot's address is base + a constant, and LLVM computes each once and
//    keeps it: under preserve_none (calls.cc .call.convention) each one live
//    across a call would be a save and a restore on the native stack. So
//    optimised code keeps the base in an alloca of its own (base_home_,
//    promoted like the slots) and stores a fresh load of frame->base into it
//    after each real call; one load replaces the saves. frame->base is the
//    caller's to write and does not change during the activation. Quick
//    code keeps its base in one value: the extra IR costs it more compile
//    time than it saves.
// .checks.once  Frame checks once per path (optimised tier). Every call
//    site, inlined or not, needs EnterFrame's checks (frame array, value
//    stack), and a real call the native stack's. Optimised code replaces
//    them with one test of the most the whole function may need
//    (EmitNoRoom): frames_end against frame + the most frames any site
//    pushes above it, stack_end against base + the most slots any site's
//    callee reaches (root-relative, so inlined bodies count), and the
//    native stack limit against this function's frame address. The test's
//    operands are the same at every site (invariant loads of limits set
//    before the thread runs code, the frame address, bounds fixed once the
//    body is emitted), and a failed test leaves the compiled code for good,
//    so GVN keeps only the first test on each path and folds every one it
//    dominates: an activation pays one test, from its first call on, and a
//    path without calls pays none. A failed test (within a few frames of a
//    limit, or the native stack low) writes the activation back, the
//    inlined frames included, and the interpreter continues it from that
//    CALL to its return (minivm_jit_continue_interpreted), with its exact
//    checks: the overflow happens where it would have, with the same trace.
//    Quick code keeps the exact checks at every site: it runs no GVN to
//    merge tests. Rejected: the exact checks at every site in optimised code
//    (three tests per call).
#include "vm/jit/frames.h"

#include <algorithm>

#include "vm/jit/ir_generator_internal.h"

namespace minivm::jit {

using enum RuntimeFunction;

uint32_t IntMaskAtCall(const PathState& path, int n, int keep_from) {
  uint32_t mask = 0;
  for (int i = 0; i < std::min({n, keep_from, Frame::kMaskSlots}); ++i) {
    if (path.is_int[i] && !path.home[i]) mask |= uint32_t{1} << i;
  }
  return mask;
}

bool InMask(uint32_t mask, int i) { return i < Frame::kMaskSlots && (mask >> i & 1) != 0; }

void IrGenerator::SetPc(uint32_t off, uint32_t mask) {
  const uintptr_t pc = reinterpret_cast<uintptr_t>(code_ + off);
  StoreField(Const64(pc | uintptr_t{mask} << Frame::kMaskShift), frame_, kFramePc, tbaa_frame_);
}

void IrGenerator::WriteOuterFramesBack() {
  for (IrGenerator* g = outer_; g != nullptr; g = g->outer_) {
    const IRBuilder<>::InsertPoint ip = g->b_.saveIP();
    g->b_.SetInsertPoint(b_.GetInsertBlock());
    g->StoreSlots(0, g->inlined_call_below_);  // what its inlined call left out
    g->b_.restoreIP(ip);
  }
}

void IrGenerator::WriteInlinedFrame() {
  if (outer_ != nullptr && !path_.frame_written) {
    // An inlined callee's frame exists from its first GC point on
    // (.frame.inlined); the caller wrote its own slots and pc at the call.
    StoreField(ConstPtr(&fn_), frame_, kFrameFn, tbaa_frame_);
    StoreField(HomeAddr(0), frame_, kFrameBase, tbaa_frame_);
  }
}

uint32_t IrGenerator::Spill(int n, uint32_t off, bool at_call, int keep_from) {
  WriteInlinedFrame();
  // .frame.lazy: at a call the callee's GC points say where the stack ends.
  if (!at_call) StoreField(frame_, thread_, kThreadFp, tbaa_thread_);
  // .frame.int-mask: a call leaves out the proven ints among the first
  // kMaskSlots slots under its arguments, and says so in the pc word.
  uint32_t mask = 0;
  if (at_call && reinterpret_cast<uintptr_t>(code_ + fn_.code.size()) <= Frame::kPcBits) {
    mask = IntMaskAtCall(path_, n, keep_from);
  }
  StoreSlots(0, n, mask);
  if (!at_call) StoreField(HomeAddr(n), thread_, kThreadSp, tbaa_thread_);
  SetPc(off, mask);
  if (at_call) {
    // On every path on from the call (the reload after it changes none):
    // the slots it wrote are home.
    path_.frame_written = true;
    for (int i = 0; i < n; ++i) path_.home[i] = path_.home[i] || !InMask(mask, i);
  }
  return mask;
}

void IrGenerator::StoreSlots(int from, int n, uint32_t skip) {
  for (int i = from; i < n; ++i) {
    if (path_.home[i] || InMask(skip, i)) continue;  // path_state.h .path.home; .frame.int-mask
    llvm::StoreInst* s = b_.CreateAlignedStore(Get(i), HomeAddr(i), llvm::Align(8));
    s->setMetadata(llvm::LLVMContext::MD_tbaa, tbaa_stack_);
  }
}

void IrGenerator::Reload(int n, int from) {
  for (int i = from; i < n; ++i) {
    if (path_.is_int[i]) continue;
    llvm::LoadInst* l = b_.CreateAlignedLoad(i64_, HomeAddr(i), llvm::Align(8));
    l->setMetadata(llvm::LLVMContext::MD_tbaa, tbaa_stack_);
    b_.CreateStore(l, slots_[i]);  // not Put: see the declaration
  }
}

LValue* IrGenerator::EmitNoRoom() {
  IrGenerator& root = Root();
  // The limits never change while the thread runs code (thread.cc sets them
  // before), so the loads are invariant and GVN may merge them across calls.
  auto limit = [&](uint64_t off) {
    llvm::LoadInst* load = b_.CreateAlignedLoad(i64_, ByteOffset(thread_, off), llvm::Align(8));
    load->setMetadata(llvm::LLVMContext::MD_tbaa, tbaa_thread_);
    load->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
    return load;
  };
  LValue* frames =
      b_.CreateICmpUGE(b_.CreatePtrToInt(root.frames_bound_, i64_), limit(kThreadFramesEnd));
  LValue* slots =
      b_.CreateICmpUGT(b_.CreatePtrToInt(root.slots_bound_, i64_), limit(kThreadStackEnd));
  LValue* native_sp = b_.CreatePtrToInt(b_.CreateCall(frameaddress_, {b_.getInt32(0)}), i64_);
  LValue* native = b_.CreateICmpULT(native_sp, limit(kThreadNativeLimit));
  return b_.CreateOr(b_.CreateOr(frames, slots), native);
}

LValue* IrGenerator::EmitFrameChecks(LValue* next, int callee_slot, const Function& callee, int n,
                                     uint32_t off) {
  const int needed_slots = callee_slot + callee.num_locals + callee.max_stack + kStackSlack;
  if (Root().hot_threshold_ == 0) {
    // .checks.once: one test for the whole function; without room the
    // interpreter runs the rest of the activation from this CALL, with its
    // own exact checks.
    IrGenerator& root = Root();
    root.room_frames_ = std::max(root.room_frames_, frame_depth_ + 1);
    root.room_slots_ = std::max(root.room_slots_, base_slot_ + needed_slots);
    BasicBlock* no_room = NewBlock("no_room");
    BasicBlock* room = NewBlock("room");
    CondBrUnlikely(EmitNoRoom(), no_room, room);
    b_.SetInsertPoint(no_room);
    WriteOuterFramesBack();
    Spill(n, off);
    b_.CreateRet(b_.CreateCall(Rt(kContinueInterpreted), {thread_, root.frame_}));
    b_.SetInsertPoint(room);
    return b_.getFalse();  // the test covered the native stack
  }
  LValue* frames_end = LoadField(thread_, kThreadFramesEnd, ptr_, tbaa_thread_);
  LValue* stack_end = LoadField(thread_, kThreadStackEnd, ptr_, tbaa_thread_);
  LValue* frames_full =
      b_.CreateICmpUGE(b_.CreatePtrToInt(next, i64_), b_.CreatePtrToInt(frames_end, i64_));
  LValue* needed = HomeAddr(needed_slots);
  LValue* stack_full =
      b_.CreateICmpUGT(b_.CreatePtrToInt(needed, i64_), b_.CreatePtrToInt(stack_end, i64_));
  BasicBlock* overflow = NewBlock("stack_overflow");
  BasicBlock* room = NewBlock("frame_room");
  CondBrUnlikely(b_.CreateOr(frames_full, stack_full), overflow, room);
  b_.SetInsertPoint(overflow);
  // The interpreter raises with the arguments still on the stack.
  Spill(n, off);
  b_.CreateCall(Rt(kStackOverflow), {thread_, b_.CreateZExt(frames_full, i32_)});
  ReturnError();
  b_.SetInsertPoint(room);
  LValue* native_sp = b_.CreatePtrToInt(b_.CreateCall(frameaddress_, {b_.getInt32(0)}), i64_);
  LValue* native_limit = LoadField(thread_, kThreadNativeLimit, i64_, tbaa_thread_);
  return b_.CreateICmpULT(native_sp, native_limit);
}

}  // namespace minivm::jit
