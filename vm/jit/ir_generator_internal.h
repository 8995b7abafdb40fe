// The code generator's class, shared by the files that emit its parts
// (docs/jit.md, "Files"): ir_generator.cc (the driver and opcode dispatch),
// path_state.h (what a path knows of each slot), frames.cc (write-back,
// reload and frame records), calls.cc (calls, inlining, entries),
// allocation.cc, objects.cc (fields, elements, built-ins, the barrier),
// operators.cc, polls.cc (safepoint polls and tier-up). Internal to
// vm/jit/, like every file that includes LLVM headers.
#ifndef MINIVM_VM_JIT_IR_GENERATOR_INTERNAL_H_
#define MINIVM_VM_JIT_IR_GENERATOR_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "gc/allocation.h"
#include "gc/heap.h"
#include "gc/write_barrier.h"
#include "llvm/IR/BasicBlock.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "vm/bytecode/opcodes.h"
#include "vm/bytecode/program.h"
#include "vm/bytecode/verifier.h"
#include "vm/jit/ir_generator.h"
#include "vm/jit/path_state.h"
#include "vm/jit/runtime.h"
#include "vm/runtime/interpreter.h"
#include "vm/runtime/thread.h"
#include "vm/runtime/vm.h"

namespace minivm::jit {

// Compiled code's type with `register_args` arguments in registers
// (program.h; calls.cc .call.signature).
llvm::FunctionType* CodeTypeOf(llvm::LLVMContext& ctx, int register_args);

using llvm::BasicBlock;
using llvm::IRBuilder;
using LValue = llvm::Value;

// Offsets compiled code uses, in one place.
inline constexpr uint64_t kTlabTop = offsetof(gc::Tlab, top);
inline constexpr uint64_t kTlabCurrentEnd = offsetof(gc::Tlab, current_end);
inline constexpr uint64_t kPollWord = offsetof(gc::Mutator, poll);
inline constexpr uint64_t kCardTable = offsetof(gc::Mutator, card_table_biased);
inline constexpr uint64_t kThreadSp = offsetof(VMThread, sp);
inline constexpr uint64_t kThreadFp = offsetof(VMThread, fp);
inline constexpr uint64_t kThreadStackEnd = offsetof(VMThread, stack_end);
inline constexpr uint64_t kThreadFramesEnd = offsetof(VMThread, frames_end);
inline constexpr uint64_t kThreadNativeLimit = offsetof(VMThread, native_stack_limit);
inline constexpr uint64_t kFrameFn = offsetof(Frame, fn);
inline constexpr uint64_t kFramePc = offsetof(Frame, pc_word);
inline constexpr uint64_t kFrameBase = offsetof(Frame, base);
static_assert(offsetof(VMThread, mutator) == 0);

// What a body returns instead of a Value when its activation did not return
// (calls.cc .call.sentinel): 2 x the Outcome. Both are even (not an int) and
// non-zero (not null) and below any object's address (not a reference).
constexpr uint64_t Sentinel(Outcome o) { return 2 * static_cast<uint64_t>(o); }
static_assert(Sentinel(Outcome::kError) == 2 && Sentinel(Outcome::kExit) == 4);
static_assert(gc::kHeaderSize > Sentinel(Outcome::kExit));
static_assert(std::is_standard_layout_v<Frame>);

// Emits one verified bytecode Function as one LLVM function (the designs in
// the files above); the bytecode compiler's counterpart is
// compiler::BytecodeGenerator. An inlined callee's body is emitted by a
// generator of its own, chained to its caller's by outer_.
class IrGenerator {
 public:
  IrGenerator(const VM& vm, const Function& fn, llvm::Module* module, uint32_t hot_threshold)
      : vm_(vm),
        program_(vm.program()),
        fn_(fn),
        code_(fn.code.data()),
        module_(module),
        ctx_(module->getContext()),
        b_(ctx_),
        i8_(b_.getInt8Ty()),
        i32_(b_.getInt32Ty()),
        i64_(b_.getInt64Ty()),
        ptr_(b_.getPtrTy()),
        hot_threshold_(hot_threshold) {}

  absl::Status Emit(const std::string& symbol);
  // calls.cc .return.self-int: emit on the assumption that a call of the
  // function itself returns an int (when it succeeds); AssumptionFailed
  // says afterwards whether the code relies on it without its RETURNs
  // proving it.
  void AssumeSelfReturnsInt() { assume_self_returns_int_ = true; }
  bool AssumptionFailed() const { return assumed_self_returns_int_ && returns_non_int_; }
  // Call sites inlined by Emit: the callee and the caller's line.
  const std::vector<InlinedCall>& inlined() const { return inlined_calls_; }

 private:
  // --- bytecode (ir_generator.cc) -------------------------------------------
  Opcode OpAt(uint32_t off) const { return static_cast<Opcode>(code_[off]); }
  uint32_t LenAt(uint32_t off) const { return OpcodeLength(OpAt(off)); }
  // Verified code: the target is an instruction of this function.
  uint32_t JumpTargetAt(uint32_t off) const {
    return static_cast<uint32_t>(JumpTarget(code_, off));
  }

  // --- IR helpers (ir_generator.cc) -----------------------------------------
  void DeclareRuntime();
  llvm::FunctionCallee Rt(RuntimeFunction f) const { return runtime_[static_cast<int>(f)]; }
  BasicBlock* NewBlock(const char* name) { return BasicBlock::Create(ctx_, name, llvm_fn_); }
  LValue* Const64(uint64_t v) { return b_.getInt64(v); }
  LValue* ConstPtr(const void* p) {
    return llvm::ConstantExpr::getIntToPtr(b_.getInt64(reinterpret_cast<uint64_t>(p)), ptr_);
  }
  LValue* ByteOffset(LValue* p, uint64_t off) {
    return off == 0 ? p : b_.CreateConstInBoundsGEP1_64(i8_, p, off);
  }
  LValue* LoadField(LValue* p, uint64_t off, llvm::Type* ty, llvm::MDNode* tbaa);
  void StoreField(LValue* v, LValue* p, uint64_t off, llvm::MDNode* tbaa);
  LValue* LoadAcquire(LValue* p);
  void StoreRelease(LValue* v, LValue* p);

  // --- slots and frames (frames.cc) -----------------------------------------
  // Slots: the allocas (registers after mem2reg) and their homes in memory.
  LValue* Get(int slot) { return b_.CreateLoad(i64_, slots_[slot]); }
  // Every write of a slot but a reload goes through Put (path_state.h
  // path_state.h .path.forget).
  void Put(int slot, LValue* v) {
    b_.CreateStore(v, slots_[slot]);
    path_.Forget(slot, fn_.num_locals);
  }
  LValue* Operand(int depth, int k) { return Get(fn_.num_locals + depth + k); }
  void SetOperand(int depth, int k, LValue* v) { Put(fn_.num_locals + depth + k, v); }
  // Optimised code reads the base from frame->base again after each call
  // (frames.cc .frame.base), so it goes through base_home_; quick code
  // keeps base_.
  LValue* HomeAddr(int slot) {
    IrGenerator& root = Root();
    LValue* base = root.base_home_ != nullptr ? b_.CreateLoad(ptr_, root.base_home_) : root.base_;
    return b_.CreateConstInBoundsGEP1_64(i64_, base, base_slot_ + slot);
  }
  // Writes slots [0, n) home, frame->pc = code + off and, but at a call
  // (`at_call`: the callee's GC points do it, frames.cc .frame.lazy), t->fp = frame
  // and t->sp = base + n. A call's write-back is on every path on from it,
  // so after it the slots and an inlined body's frame are home
  // (path_state.h .path.home). At a call the slots below `keep_from` that are proven
  // ints and not home are left out, named in the pc word's int mask
  // instead, and stay not home (frames.cc .frame.int-mask); it returns that mask,
  // for the call's poll.
  uint32_t Spill(int n, uint32_t off, bool at_call = false, int keep_from = 0);
  // Reads slots [from, n) back from home, but those known to hold ints,
  // which no collection moves (path_state.h .path.int). It leaves path_ as it is: on the
  // path it is on, home and value are then the same, and on any other they
  // were as path_.home says. A runtime call that writes a result home must
  // Forget its slot first.
  void Reload(int n, int from = 0);
  // frame->pc_word: the pc, and the int mask (frames.cc .frame.int-mask).
  void SetPc(uint32_t off, uint32_t mask = 0);
  // Before the interpreter takes the activation over, the slots each
  // caller's call left out (ints, not home) go home (frames.cc .frame.int-mask).
  void WriteOuterFramesBack();
  // Writes home the slots in [from, n) that are not there (path_state.h .path.home), but
  // those the int mask `skip` names.
  void StoreSlots(int from, int n, uint32_t skip = 0);
  // An inlined body's frame's function and base, unless every path here
  // wrote them (path_state.h .path.home).
  void WriteInlinedFrame();
  // EnterFrame's frame-array and value-stack checks for a call of `callee`
  // whose frame would be `next` at slot `callee_slot` of this body's base,
  // at the CALL at `off` with `n` slots: on overflow, writes the slots home
  // and raises as the interpreter does; else continues, and returns whether
  // the native stack is low there. Optimised code tests once for all sites
  // instead (frames.cc .checks.once).
  LValue* EmitFrameChecks(LValue* next, int callee_slot, const Function& callee, int n,
                          uint32_t off);
  // Optimised code's test that covers every call site's checks at once
  // (frames.cc .checks.once): true when the frames, slots or native stack the
  // function may need at most are not all there. The same value at every
  // site, so that GVN keeps only the first on each path.
  LValue* EmitNoRoom();

  // --- values (ir_generator.cc) ---------------------------------------------
  // Value tests on the tagged bits.
  LValue* IsInt(LValue* v) { return b_.CreateTrunc(v, b_.getInt1Ty()); }
  LValue* BothInt(LValue* a, LValue* c) { return IsInt(b_.CreateAnd(a, c)); }
  LValue* IsRef(LValue* v) {
    return b_.CreateAnd(b_.CreateICmpNE(v, Const64(0)), b_.CreateNot(IsInt(v)));
  }
  LValue* IsTruthy(LValue* v) { return b_.CreateICmpUGT(v, Const64(1)); }
  LValue* TagBool(LValue* c) { return b_.CreateSelect(c, Const64(3), Const64(1)); }
  LValue* Untag(LValue* v) { return b_.CreateAShr(v, 1); }
  LValue* Tag(LValue* i) { return b_.CreateOr(b_.CreateShl(i, 1), Const64(1)); }
  LValue* AsPtr(LValue* v) { return b_.CreateIntToPtr(v, ptr_); }

  void CondBrUnlikely(LValue* cond, BasicBlock* unlikely, BasicBlock* likely) {
    b_.CreateCondBr(cond, unlikely, likely, unlikely_weights_);
  }
  // if (status != kReturn) return Sentinel(status);
  void ReturnIfNonZero(LValue* status);
  // Raising path: return the error sentinel.
  void ReturnError() { b_.CreateRet(Const64(Sentinel(Outcome::kError))); }
  // After a runtime call that raised when `raised` is true: an unlikely
  // "raised" block returns the error sentinel; code continues in a new
  // block named `cont`.
  void ReturnErrorIf(LValue* raised, const char* cont) {
    BasicBlock* fail = NewBlock("raised");
    BasicBlock* next = NewBlock(cont);
    CondBrUnlikely(raised, fail, next);
    b_.SetInsertPoint(fail);
    ReturnError();
    b_.SetInsertPoint(next);
  }
  // True if a body's result `r` is a sentinel: (r - 2) & ~2 == 0.
  LValue* IsSentinel(LValue* r) {
    return b_.CreateICmpEQ(b_.CreateAnd(b_.CreateSub(r, Const64(2)), Const64(~uint64_t{2})),
                           Const64(0));
  }
  // The compiled code's type for a function of `arity` parameters
  // (calls.cc .call.signature).
  llvm::FunctionType* CodeType(int arity) { return CodeTypeOf(ctx_, RegisterArgs(arity)); }

  // --- polls and tier-up (polls.cc) -----------------------------------------
  // The poll at a loop back-edge or a call: its cold path writes slots
  // [from, n) home (the others are home already), sets t->sp = base + n and
  // the pc, and reads [from, n) back after the safepoint.
  void EmitPoll(int n, uint32_t pc_off, int from, uint32_t pc_mask = 0);
  // polls.cc .tier-up: slots [0, n) live, `pc_off` the pc to write back, `entry` the
  // optimised code's entry argument. Nothing unless hot_threshold_.
  void EmitTierUp(int n, uint32_t pc_off, uint32_t entry);
  // LOOP: the back-edge's poll and tier-up.
  void EmitLoop(uint32_t off, int depth);

  // --- instructions (ir_generator.cc: dispatch; operators.cc) ---------------
  void EmitInstruction(uint32_t off, int depth);
  // ADD..GE, DIV, MOD, BIT_AND..SHR: the integer fast path inline, else the runtime.
  void EmitArithmetic(Opcode op, uint32_t off, int depth);
  LValue* IntFastPath(Opcode op, LValue* a, LValue* c);  // both tagged ints
  void EmitEquality(Opcode op, int depth);
  void EmitUnary(Opcode op, uint32_t off, int depth);  // NEG, BIT_NOT
  // Calls a runtime function on the `pops` operands below `depth` that
  // leaves `results` (0 or 1) values in their place and returns nonzero on
  // success; on zero returns kError.
  void EmitSlowOperandCall(llvm::FunctionCallee callee, uint32_t off, int depth, int pops,
                           std::vector<LValue*> leading_args, int results = 1);

  // --- objects (objects.cc) -------------------------------------------------
  void EmitCardMark(LValue* holder, LValue* stored, LValue* extra_condition);
  // Field or element `index` (untagged) of `obj`, past `header_size`: a
  // release store of the top operand with its card mark, or an acquire load
  // that replaces the operands a read pops (the object, and the index if
  // any: `read_pops`).
  void EmitSlotAccess(LValue* obj, LValue* index, uint64_t header_size, int depth, bool write,
                      int read_pops);
  void EmitField(uint32_t off, int depth, bool write);
  void EmitIndex(uint32_t off, int depth, bool write);
  // CALL_BUILTIN (`builtin`) or SPAWN: len inline, array(n) and bytes(n)'s
  // allocation inline, else a call of the runtime.
  void EmitRuntimeCall(uint32_t off, int depth, bool builtin);

  // --- allocation (allocation.cc) -------------------------------------------
  // The TLAB bump of allocation.cc .alloc.tlab for `size` bytes: branches to `slow` when
  // top + size passes current_end (the TLAB is full or a sample is due),
  // else continues in `fast`, where it has bumped top, stored the class
  // pointer and zeroed the rest, except the first `initialised` bytes of
  // the body, which the caller stores before any GC point; returns the
  // object's address (the old top).
  LValue* EmitTlabBump(LValue* size, const Klass* klass, BasicBlock* slow, BasicBlock* fast,
                       uint64_t initialised);
  void EmitNew(uint32_t off, int depth);
  void EmitInitFields(uint32_t off, int depth);
  // The inline fast path of array(n) / bytes(n): the current block branches
  // to the returned block with the new object as the operand, or stays
  // (positioned on the slow path) for the built-in call to follow.
  BasicBlock* EmitNewArrayFastPath(int depth, bool refs);

  // --- calls (calls.cc) -----------------------------------------------------
  void EmitCall(uint32_t off, int depth);
  // calls.cc .inline: whether the CALL of `callee` is inlined (inline_policy.h),
  // which counts it against the budget.
  bool Inlinable(const Function& callee);
  void EmitInlinedCall(uint32_t off, int depth, const Function& callee);
  // Run on the callee's generator: emits its body at `outer`'s insertion
  // point, on the frame `frame` (not pushed) with its slots at base_slot_;
  // RETURN stores into `result` and branches to `done`.
  absl::Status EmitInlineBody(IrGenerator& outer, LValue* frame, const std::vector<LValue*>& args,
                              llvm::AllocaInst* result, BasicBlock* done);
  void EmitReturn(int depth);

  // The body's loop over the bytecode (ir_generator.cc, path_state.h
  // path_state.h .path.flow).
  absl::Status EmitInstructions();

  // The generator of the function being compiled, at the end of outer_.
  IrGenerator& Root() { return outer_ == nullptr ? *this : outer_->Root(); }

  const VM& vm_;
  const Program& program_;
  const Function& fn_;
  const uint8_t* code_;
  llvm::Module* module_;
  llvm::LLVMContext& ctx_;
  IRBuilder<> b_;
  llvm::Type* i8_;
  llvm::Type* i32_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
  const uint32_t hot_threshold_;  // 0: optimised code, no hotness counting (polls.cc .tier-up)

  // The verifier's facts (stack depths, block leaders, loop headers: the
  // OSR entries), indexed by bytecode offset.
  VerifiedCode verified_;

  llvm::Function* llvm_fn_ = nullptr;
  LValue* thread_ = nullptr;
  LValue* frame_ = nullptr;
  // The root's only: an inlined body's slots are at base_slot_ from it.
  LValue* base_ = nullptr;
  llvm::AllocaInst* base_home_ = nullptr;
  LValue* cards_ = nullptr;
  std::vector<llvm::AllocaInst*> slots_;
  std::vector<BasicBlock*> blocks_;  // by offset, for leaders
  llvm::MDNode* unlikely_weights_ = nullptr;
  llvm::MDNode* tbaa_stack_ = nullptr;   // value-stack slots
  llvm::MDNode* tbaa_thread_ = nullptr;  // VMThread/Mutator/TLAB words
  llvm::MDNode* tbaa_frame_ = nullptr;   // Frame records
  llvm::MDNode* tbaa_object_ = nullptr;  // object headers and initialising stores

  llvm::FunctionCallee runtime_[kNumRuntimeFunctions];  // by RuntimeFunction
  llvm::Function* frameaddress_ = nullptr;

  // Set when this generator emits an inlined callee (calls.cc .inline).
  IrGenerator* outer_ = nullptr;
  // Where this body's frame and slots are relative to the root's: frames
  // above the root's frame, and the index of base_'s slot from the root's
  // base (frames.cc .checks.once).
  int frame_depth_ = 0;
  int base_slot_ = 0;
  // frames.cc .checks.once, in the root only: the most frames above its own and slots
  // above its base that any call site needs, and the placeholders in the
  // entry block that become them once the body is emitted.
  int room_frames_ = 0;
  int room_slots_ = 0;
  llvm::Instruction* room_frames_bytes_ = nullptr;
  llvm::Instruction* room_slot_count_ = nullptr;
  LValue* frames_bound_ = nullptr;
  LValue* slots_bound_ = nullptr;
  // What holds on every path to the instruction being emitted
  // (path_state.h .path.flow).
  PathState path_;
  llvm::AllocaInst* inline_result_ = nullptr;
  // Which arguments the caller knew to be ints (path_state.h .path.int).
  std::vector<bool> args_int_;
  BasicBlock* inline_done_ = nullptr;
  std::vector<InlinedCall> inlined_calls_;
  absl::Status inline_status_;  // the first inlining that failed
  size_t inlined_bytes_ = 0;    // against kInlineBudget
  // frames.cc .frame.int-mask: the slots under the arguments of the inlined call whose
  // body is being emitted.
  int inlined_call_below_ = 0;
  // calls.cc .return.self-int. In the root: a call of the function itself returns an
  // int (assumed), and that assumption was used. In every body: some
  // RETURN's value is not known to be an int.
  bool assume_self_returns_int_ = false;
  bool assumed_self_returns_int_ = false;
  bool returns_non_int_ = false;
};

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_IR_GENERATOR_INTERNAL_H_
