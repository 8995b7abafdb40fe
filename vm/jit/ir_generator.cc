// Bytecode to LLVM IR.
//
// Design:
//  1. Same frames as the interpreter. A compiled function runs on the Frame
//     and the VM-managed value-stack slots its caller pushed, exactly as the
//     interpreter would (vm/runtime/thread.h). Stack traces, GetStackTrace
//     and GetLineNumber therefore read the same Frame records in both tiers,
//     and on-stack replacement needs no state conversion: the interpreter
//     stops at a loop header and the compiled code reloads the slots.
//  2. Slots in registers between calls. Each local and operand slot is an
//     LLVM alloca, promoted to SSA values by mem2reg/SROA. The value stack
//     in memory is the slots' home only at a "GC point": any call into the
//     runtime that may allocate, collect, stop at a safepoint, run an agent
//     callback, walk the stack or raise. Before one, the compiled code
//     stores (spills) every slot below the instruction's stack depth to the
//     value stack and sets t->sp and frame->pc; after it, it reloads every
//     slot. The collector therefore finds every reference precisely in
//     [stack_begin, sp) and updates it in place, and no compiled code holds a
//     stale pointer across a moving collection: nothing lives across a GC
//     point except in those slots (constants such as Klass pointers are not
//     heap objects). No stack maps, no statepoints.
//     Rejected: LLVM's gc.statepoint/stack maps (a relocation pass and a
//     stack-map parser for a tier whose values already have a home);
//     keeping the slots in memory all the time (stores on every push).
//  3. Stack depth is static per instruction (the front end guarantees it and
//     the bytecode verifier, vm/bytecode/verifier.h, re-checks it), so
//     operand slot k is always alloca num_locals + k; a spill at depth d
//     writes exactly num_locals + d slots.
//  4. Allocation: NEW inlines the TLAB fast path — load top, add the
//     constant size, compare with current_end, store top, store the class
//     pointer, zero the gc_word and the fields (a TLAB is not zeroed in
//     advance, gc/tlab.h) but those INIT_FIELDS stores before any GC point
//     (FilledBeforeAnyGcPoint). The slow path is a call to the runtime's
//     (minivm_jit_new -> gc::AllocateSlowPath), the same one the interpreter
//     uses; sampling lives entirely there, by lowering current_end. Nothing
//     in the generated code depends on whether sampling is on. array(n) and
//     bytes(n) of an int n that fits a TLAB do the same with the size
//     computed from n and a store of the length word; their slow path is
//     the built-in itself (EmitNewArrayFastPath).
//  5. The write barrier is inline: a relaxed byte store into the card table
//     at (holder >> kCardShift), when the stored value is a reference. NEW's
//     initialising stores skip it on the fast path (a TLAB object is young,
//     and young objects' cards are never scanned) but not on the slow path
//     (the object may be old).
//  6. Memory model as the interpreter's (vm/runtime/shared_slots.h):
//     acquire loads and release stores for globals, fields and elements.
//  7. Safepoint polls at every CALL (in the caller, as the interpreter
//     polls; the optimising tier only at the first on each path, design
//     13) and at every loop back-edge: an acquire load of the poll word
//     and a cold call. Function entry does not poll: every way in is a CALL
//     (which polled, or came after one that did in the caller's
//     activation), or the start of a thread.
//  8. Calls between compiled functions (docs/jit.md, "Calls"). A compiled
//     function is `i64 f(thread, frame, entry, arg0, ..., argN-1)`
//     (JitEntry in vm/bytecode/program.h; arguments in registers up to
//     kMaxRegisterArity). A compiled caller writes back only its own slots
//     below the arguments, pushes the callee's Frame with EnterFrame's
//     checks (design 12; function and base; the callee's pc is written by
//     its own GC points, the only places it is read), and calls it with the
//     arguments in registers (a direct call for self-recursion, else
//     through Function::jit_code). The callee keeps its parameters in
//     registers and writes them home at its GC points like any slot, so the
//     arguments are stored only if a collection can see them; its result
//     comes back in rax. An error or exit comes back as a sentinel that no
//     Value can be (2 or 4: even, so not an int, and below any object
//     address). When the callee is not compiled, or (quick code) the native
//     stack is low, the caller writes the arguments home, nulls the
//     callee's other locals and runs it in the interpreter. The
//     interpreter calls compiled code the same way (RunCompiled in
//     vm/runtime/interpreter.cc).
//     Two entries, two conventions: optimised code is emitted with LLVM's
//     preserve_none (OptimisedCallingConv), in which the callee saves no
//     registers, so an optimised caller saves only what it keeps live
//     across the call and a leaf saves nothing; it calls Function::jit_body.
//     Quick code and C++ use the C convention and Function::jit_code. Quick
//     code cannot take preserve_none: fast instruction selection lowers
//     neither its arguments nor its return and fell back to SelectionDAG in
//     every function (19% more LLVM instructions for eager's start-up). The
//     two meet through shared trampolines, one per register arity, linked
//     once (EmitTrampolines): an optimised function's jit_code is
//     enter_optimised.N (C, calls frame->fn->jit_body), a quick function's
//     jit_body is enter_quick.N (preserve_none, calls frame->fn->jit_code).
//     They read the callee's Frame, which every caller has pushed, so no
//     per-function wrapper is compiled (one made eager's start-up 1.43x).
//     Rejected: preserve_none everywhere with C++ entering through
//     trampolines (the quick tier's fallback above).
//  9. Errors: the runtime raises on the thread; compiled code returns the
//     error sentinel up the native chain with the frames untouched, so the
//     trace is the interpreter's.
// 10. Inlining (docs/jit.md, "Calls"): a CALL of a small function without
//     loops or spawns (kMaxInlineBytecode bytes), whose own calls are to
//     small leaves that inline too, emits the callee's body in place, with
//     its own slots, up to kMaxInlineDepth levels deep and kInlineBudget
//     bytes in all. A recursive function is inlined into itself two
//     levels deep (kMaxRecursiveInlineLevel), so fib's body holds six
//     copies of itself, the four innermost make real calls, and a third
//     of fib's calls are real ones (half with one level, all with none).
//     The caller's slots go home
//     as for a call, and the frame checks stay, so a stack overflow happens
//     at the same depth as in the interpreter. The callee's Frame is written
//     lazily: only its GC points (its calls, and slow paths, all cold)
//     write its function and base (the first on each path, design 16) and
//     pc, and make it t->fp (design 15), so a collection, a stack trace, an
//     agent's GetStackTrace and an error trace see exactly the frames of the
//     uninlined call, lines included. Its RETURN continues in the caller,
//     whose next GC point makes the caller's frame t->fp again (design
//     15). A call the inlined body makes is a GC point like any other: it
//     writes the inlined frame first, so the chain of frames is whole below
//     the callee. No poll on entry: an inlined body without loops is
//     bounded work, and its calls poll.
// 11. Tier-up (quick tier only, jit.cc design 2): at entry and at every loop
//     back-edge the code counts Function::hotness as the interpreter does
//     (relaxed load + store). At the threshold a cold block calls
//     minivm_jit_hot (a GC point: --jit-sync compiles there), which reports
//     the function and returns its optimised code once published; the
//     activation then continues there, at entry with entry 0 and the
//     arguments (design 8), at a back-edge through the loop header's OSR
//     entry, on the same frame, as the interpreter's OSR does, and returns
//     what that code returns. Until then the runtime restarts the
//     count, so waiting costs one call per threshold events, not one per
//     event. The rest stays out of line because this code is in every
//     eagerly compiled function: with the state and code checks inline,
//     counting made a trivial function's quick compile 46% dearer (LLVM
//     instructions, callgrind), out of line 23%. Nothing here depends on
//     sampling; the optimising tier emits none of it.
// 12. Frame checks once per path (optimised tier). Every call site, inlined
//     or not, needs EnterFrame's checks (frame array, value stack) and a
//     real call the native stack's. The optimised tier replaces them with
//     one test of the most the whole function may need: frames_end against
//     frame + the most frames any site pushes above it, stack_end against
//     base + the most slots any site's callee reaches (root-relative, so
//     inlined bodies count), and the native stack limit against this
//     function's frame address. The test's operands are the same at every
//     site (invariant loads of limits set before the thread runs code, the
//     frame address, bounds fixed once the body is emitted), and a failed
//     test leaves the compiled code for good, so GVN keeps only the first
//     test on each path and folds every one it dominates: an activation
//     pays one test, from its first call on, instead of three per call,
//     and a path without calls pays none. A failed test (within a few
//     frames of a limit, or the native stack low) writes the activation
//     back, the inlined frames included, as for any GC point, and the
//     interpreter continues it from that CALL to its return
//     (minivm_jit_continue_interpreted), with its exact checks: the
//     overflow happens where it would have, with the same trace, and a call
//     with the native stack low runs interpreted as before. The quick tier
//     keeps the exact checks at every site: it runs no GVN to merge tests.
// 13. Polls at calls, once per path (optimised tier). A poll bounds the time
//     a thread takes to reach a safepoint; what could run unboundedly
//     without one is a loop (its LOOP polls) or a recursion, and a
//     recursion makes a first real call in every activation. So optimised
//     code polls at a real call only if some path from the activation's
//     start (or from a loop header, where on-stack replacement enters)
//     reaches it without an earlier real call; fib's code polls at four of
//     its eight real calls (an innermost copy's base case returns without
//     a call). An inlined body starts in its caller's state
//     (it is the same activation) and an inlined call leaves it unchanged.
//     The state is computed while the body is emitted (EmitInstructions):
//     every edge but LOOP goes forward. Between two polls a thread now runs
//     at most one activation's straight-line code plus bounded callees,
//     instead of one call's. Quick code polls at every call, as the
//     interpreter does.
// 14. Slow paths that only raise end the activation. An operator other
//     than ADD, DIV and MOD reaches its slow path only with a non-int
//     operand, which raises (BinarySlowCanSucceed in
//     vm/runtime/slow_paths.h), so its slow path writes the frame back,
//     calls the runtime and returns the error: no reload of every slot and
//     no merge with the fast path, which made each such operator cost a
//     block of loads and a phi per live slot to compile.
// 15. t->fp and t->sp are written at GC points only (both tiers). Nothing
//     reads a thread's fp and sp but that thread at a GC point, or another
//     thread while it is stopped at one: a collection's roots, stack traces,
//     an error's report, an agent's stack walk. So every GC point but a
//     call makes its own frame t->fp and sets t->sp (Spill, EmitPoll), and a
//     call (real or inlined) writes only the caller's slots and pc and the
//     callee's function and base: where the stack ends is the callee's to
//     say, at its own GC points (compiled code), or the interpreter's, which
//     keeps both exact (minivm_jit_call_interpreted makes the frame t->fp).
//     After a return, t->fp may still name a frame above the caller's until
//     the caller's next GC point; nothing reads it there. An error still
//     leaves the raising frame as t->fp all the way up, for the report's
//     trace, and whoever calls compiled code from C++ (RunCompiled's
//     callers) sets both when it returns, as before. This saves three
//     stores per real call (t->fp and t->sp before it, t->fp after) and one
//     per inlined return.
// 16. What is home already is not written again (both tiers). A GC point
//     writes back only the slots whose home does not hold their value: a
//     call's write-back and its reload after the return (which every path
//     to the call's continuation passes) leave the caller's slots below
//     the arguments home, until the code writes them again (Put). An
//     inlined body's frame gets its function and base at its first GC point
//     on each path, not at every one: nothing else writes that record
//     while the body runs (its callees' frames are above it). The state
//     flows like design 13's (PathState, met at jump targets, nothing known
//     at a loop header). A slow path's reload leaves it as it is: on that
//     path home and value agree again, on the others they are as before.
//     fib's activation writes its n home once instead of at both calls.
// 17. What a path has proven about a value is kept (both tiers). Every
//     operator but ADD goes on only with int operands (design 14; DIV and
//     MOD come back from their slow path only with ints too), so on the
//     path after one, both operands and the result are ints, and so is the
//     local an operand was loaded from while it keeps that value
//     (PathState::is_int and copy_of; PUSH_INT, comparisons, EQ, NE and NOT
//     give ints too). An operator on two such slots is its fast path alone,
//     without a test, and a reload after a GC point skips them: no
//     collection moves an int, and nothing else writes a caller's slots.
//     Where a runtime call leaves a result in a slot's home (a built-in, a
//     slow ADD, DIV or MOD, an index), the slot is forgotten before the
//     reload. The state flows as design 16's, and an inlined body starts
//     with what its caller knew of the arguments. fib tests its n once per
//     activation instead of after each call, and an inlined copy takes its
//     n - 1 as an int.
// 18. The base read again after a call (optimised tier). Every slot's
//     address is base + a constant, and LLVM computes each once and keeps
//     it: under preserve_none (design 8) each one live across a call was a
//     save and a restore on the native stack. So optimised code keeps the
//     base in an alloca of its own (base_home_, promoted like the slots)
//     and stores a fresh load of frame->base into it after each real call:
//     addresses after the call derive from that load, and one load replaces
//     the saves. frame->base is the caller's to write and does not change
//     during the activation. Quick code keeps its base in one value: the
//     extra IR made eager's start-up 6% dearer.
// 19. What a recursive function returns (optimised tier). Optimised code is
//     first emitted on the assumption that a call of the function itself
//     returns an int when it returns at all, and keeps it only if every
//     RETURN of the function's own body then returns a value design 17
//     proves an int; else it is emitted again without it (EmitFunction).
//     The assumption proves itself by induction on the depth of calls: the
//     deepest completed activation returns through a RETURN whose proof
//     used no call that completed, and each activation above it returns
//     through one whose proof used only completed calls of the function,
//     ints by then. The proof is of the bytecode, so it holds whichever
//     tier runs a call, the interpreter included. An error or exit comes
//     back as a sentinel, even and so not an int: one bit tests a self
//     call's result. An inlined body whose every RETURN returns a proven
//     int gives its caller a proven int (any callee, design 17's state at
//     the RETURN). fib's sum of two calls is then an add alone, and
//     check's in binary trees too; bottom_up returns objects and is
//     emitted twice (the IR is a small part of a compile, section 14 of
//     docs/performance.md's JIT tier).
// 20. Proven ints are not written home at calls (both tiers). A home exists
//     for the collector (and for the interpreter, should it take the
//     activation over), and the collector needs nothing of an int. So a
//     call's write-back (Spill with at_call, real or inlined) leaves out the
//     slots under its arguments that design 17 proves to be ints and whose
//     homes do not hold them already, among the frame's first kMaskSlots,
//     and names them in the top 16 bits of the pc word it writes
//     (vm/runtime/thread.h, 5.): VM::VisitMutatorRoots skips those homes,
//     which may hold anything, a stale reference from an earlier deeper
//     frame included. They stay "not home" (design 16), so every later
//     write-back that is not a call's writes them: a slow path's, a poll's
//     away from a call, and the interpreter's hand-over, which also writes
//     what each inlined caller's call left out (WriteOuterFramesBack). The
//     poll at a call repeats the call's mask, since the frame's slots are
//     as the call left them. The mask is true for the frame while it is at
//     that instruction whichever tier runs it (the slots are ints on every
//     path there), and each GC point after it writes the pc word again.
//     The reload after the call skips them already (design 17). fib's
//     activation wrote its n and its first call's result home at every
//     call; those stores were 29% of its time (docs/performance.md, "JIT
//     tier", 15), though a store is one instruction.
// 21. What each path knows of objects (both tiers). A field access that
//     gets past its slow path found an object with that field: ResolveField
//     raises for null, an int or an object without it. So from there on the
//     operand, and the local it was loaded from (copy_of), are known to hold
//     an object, as design 17 knows ints: a store to the slot forgets it,
//     a join keeps it only if every path in knew it, a loop header knows
//     nothing, and a collection moves the object but leaves it an object.
//     A later field access through that local branches straight to the
//     class test, without the null and int test. check's `tree.left` and
//     `tree.right` after `tree.left == null` each skip it.
#include "vm/jit/ir_generator.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gc/allocation.h"
#include "gc/heap.h"
#include "gc/write_barrier.h"
#include "llvm/IR/BasicBlock.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "vm/bytecode/builtins.h"
#include "vm/bytecode/opcodes.h"
#include "vm/bytecode/verifier.h"
#include "vm/jit/runtime.h"
#include "vm/runtime/builtin_classes.h"
#include "vm/runtime/interpreter.h"
#include "vm/runtime/slow_paths.h"
#include "vm/runtime/thread.h"

namespace minivm::jit {
namespace {

// Compiled code's type with `register_args` arguments in registers
// (program.h, design 8).
llvm::FunctionType* CodeTypeOf(llvm::LLVMContext& ctx, int register_args) {
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  std::vector<llvm::Type*> params = {ptr, ptr, llvm::Type::getInt32Ty(ctx)};
  params.insert(params.end(), register_args, i64);
  return llvm::FunctionType::get(i64, params, false);
}

using llvm::BasicBlock;
using llvm::IRBuilder;
using LValue = llvm::Value;

// Offsets compiled code uses, in one place.
constexpr uint64_t kTlabTop = offsetof(gc::Tlab, top);
constexpr uint64_t kTlabCurrentEnd = offsetof(gc::Tlab, current_end);
constexpr uint64_t kPollWord = offsetof(gc::Mutator, poll);
constexpr uint64_t kCardTable = offsetof(gc::Mutator, card_table_biased);
constexpr uint64_t kThreadSp = offsetof(VMThread, sp);
constexpr uint64_t kThreadFp = offsetof(VMThread, fp);
constexpr uint64_t kThreadStackEnd = offsetof(VMThread, stack_end);
constexpr uint64_t kThreadFramesEnd = offsetof(VMThread, frames_end);
constexpr uint64_t kThreadNativeLimit = offsetof(VMThread, native_stack_limit);
constexpr uint64_t kFrameFn = offsetof(Frame, fn);
constexpr uint64_t kFramePc = offsetof(Frame, pc_word);
constexpr uint64_t kFrameBase = offsetof(Frame, base);
static_assert(offsetof(VMThread, mutator) == 0);

// What a body returns instead of a Value when its activation did not return
// (design 8): 2 x the Outcome. Both are even (not an int) and non-zero (not
// null) and below any object's address (not a reference).
constexpr uint64_t Sentinel(Outcome o) { return 2 * static_cast<uint64_t>(o); }
static_assert(Sentinel(Outcome::kError) == 2 && Sentinel(Outcome::kExit) == 4);
static_assert(gc::kHeaderSize > Sentinel(Outcome::kExit));
static_assert(std::is_standard_layout_v<Frame>);

// LLVM types of the runtime functions' C++ parameter and result types
// (vm/jit/runtime.h): a type with no mapping here does not compile.
template <typename T>
llvm::Type* LlvmTypeOf(llvm::LLVMContext& ctx) {
  if constexpr (std::is_void_v<T>) {
    return llvm::Type::getVoidTy(ctx);
  } else if constexpr (std::is_pointer_v<T>) {
    return llvm::PointerType::getUnqual(ctx);
  } else {
    // bool has no fixed ABI width to match; use an int32_t.
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>,
                  "runtime functions take and return pointers and fixed-width integers");
    return llvm::Type::getIntNTy(ctx, 8 * sizeof(T));
  }
}

// The LLVM signature of a runtime function, from its C++ type.
template <typename F>
struct RuntimeFunctionType;
template <typename R, typename... Params>
struct RuntimeFunctionType<R(Params...) noexcept> {
  static llvm::FunctionType* Get(llvm::LLVMContext& ctx) {
    return llvm::FunctionType::get(LlvmTypeOf<R>(ctx), {LlvmTypeOf<Params>(ctx)...}, false);
  }
};

using enum RuntimeFunction;

// Emits one verified bytecode Function as one LLVM function (the design
// above); the bytecode compiler's counterpart is compiler::BytecodeGenerator.
// The largest callee inlined (design 10), in bytes of bytecode. A field
// read is 9 bytes, a NEW 6, a small-integer push 2 to 10: room for a
// constructor-like function of a few fields, a getter, a small arithmetic
// helper (HotSpot's MaxInlineSize is 35 bytes of its denser bytecode).
constexpr size_t kMaxInlineBytecode = 64;
// A recursive function inlined into itself may be larger: each level of
// copies halves the calls on every recursive path (binary trees' bottom_up
// and check are 84 and 77 bytes, fib 62).
constexpr size_t kMaxRecursiveInlineBytecode = 128;
// Copies of a recursive function inside itself, nested. HotSpot stops at
// one (MaxRecursiveInlineLevel); a real call costs more here (its Frame is
// written, docs/jit.md "Calls"), and the second level makes fib(40) 0.86x
// the time at about twice the compile work for such a function
// (docs/performance.md, "JIT tier" 14). A third made fib's calls 0.87x the
// instructions again for 2.5x the compile work.
constexpr int kMaxRecursiveInlineLevel = 2;
// The most bytecode inlined into one function, all sites together, so that
// compile work per function stays bounded (a function of 600 calls to
// small functions inlines the first 64 or so and calls the rest).
constexpr size_t kInlineBudget = 2048;
// Inlined bodies within inlined bodies, at most.
constexpr int kMaxInlineDepth = 3;

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
  // Design 19: emit on the assumption that a call of the function itself
  // returns an int (when it succeeds); AssumptionFailed says afterwards
  // whether the code relies on it without its RETURNs proving it.
  void AssumeSelfReturnsInt() { assume_self_returns_int_ = true; }
  bool AssumptionFailed() const { return assumed_self_returns_int_ && returns_non_int_; }
  // Call sites inlined by Emit: the callee and the caller's line.
  const std::vector<InlinedCall>& inlined() const { return inlined_calls_; }

 private:
  // --- bytecode ------------------------------------------------------------
  Opcode OpAt(uint32_t off) const { return static_cast<Opcode>(code_[off]); }
  uint32_t LenAt(uint32_t off) const { return OpcodeLength(OpAt(off)); }
  // Verified code: the target is an instruction of this function.
  uint32_t JumpTargetAt(uint32_t off) const {
    return static_cast<uint32_t>(JumpTarget(code_, off));
  }

  // --- IR helpers ----------------------------------------------------------
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

  // Slots: the allocas (registers after mem2reg) and their homes in memory.
  LValue* Get(int slot) { return b_.CreateLoad(i64_, slots_[slot]); }
  // Every write of a slot but a reload goes through Put (designs 16, 17).
  void Put(int slot, LValue* v) {
    b_.CreateStore(v, slots_[slot]);
    path_.Forget(slot, fn_.num_locals);
  }
  LValue* Operand(int depth, int k) { return Get(fn_.num_locals + depth + k); }
  void SetOperand(int depth, int k, LValue* v) { Put(fn_.num_locals + depth + k, v); }
  // Optimised code reads the base from frame->base again after each call
  // (design 18), so it goes through base_home_; quick code keeps base_.
  LValue* HomeAddr(int slot) {
    IrGenerator& root = Root();
    LValue* base = root.base_home_ != nullptr ? b_.CreateLoad(ptr_, root.base_home_) : root.base_;
    return b_.CreateConstInBoundsGEP1_64(i64_, base, base_slot_ + slot);
  }
  // Writes slots [0, n) home, frame->pc = code + off and, but at a call
  // (`at_call`: the callee's GC points do it, design 15), t->fp = frame and
  // t->sp = base + n. A call's write-back is on every path on from it, so
  // after it the slots and an inlined body's frame are home (design 16).
  // At a call (design 20) the slots below `keep_from` that are proven ints
  // and not home are left out, named in the pc word's int mask instead,
  // and stay not home; it returns that mask, for the call's poll.
  uint32_t Spill(int n, uint32_t off, bool at_call = false, int keep_from = 0);
  // Reads slots [from, n) back from home, but those known to hold ints,
  // which no collection moves (design 17). It leaves path_ as it is: on
  // the path it is on, home and value are then the same, and on any other
  // they were as path_.home says (design 16). A runtime call that writes a
  // result home must Forget its slot first.
  void Reload(int n, int from = 0);
  // Slot i is one an int mask names (design 20).
  static bool InMask(uint32_t mask, int i) { return i < Frame::kMaskSlots && (mask >> i & 1) != 0; }
  // frame->pc_word: the pc, and the int mask of design 20 (thread.h, 5.).
  void SetPc(uint32_t off, uint32_t mask = 0);
  // Design 20: before the interpreter takes the activation over, the
  // slots each caller's call left out (ints, not home) go home.
  void WriteOuterFramesBack();
  // Writes home the slots in [from, n) that are not there (design 16), but
  // those the int mask `skip` names (design 20).
  void StoreSlots(int from, int n, uint32_t skip = 0);
  // An inlined body's frame's function and base, unless every path here
  // wrote them (design 16).
  void WriteInlinedFrame();

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
  // True if a body's result `r` is a sentinel: (r - 2) & ~2 == 0.
  LValue* IsSentinel(LValue* r) {
    return b_.CreateICmpEQ(b_.CreateAnd(b_.CreateSub(r, Const64(2)), Const64(~uint64_t{2})),
                           Const64(0));
  }
  // The compiled code's type for a function of `arity` parameters
  // (program.h, design 8).
  llvm::FunctionType* CodeType(int arity) { return CodeTypeOf(ctx_, RegisterArgs(arity)); }

  // The poll at a loop back-edge or a call: its cold path writes slots
  // [from, n) home (the others are home already), sets t->sp = base + n and
  // the pc, and reads [from, n) back after the safepoint.
  void EmitPoll(int n, uint32_t pc_off, int from, uint32_t pc_mask = 0);
  // Design 11: slots [0, n) live, `pc_off` the pc to write back, `entry`
  // the optimised code's entry argument. Nothing unless hot_threshold_.
  void EmitTierUp(int n, uint32_t pc_off, uint32_t entry);
  void EmitCardMark(LValue* holder, LValue* stored, LValue* extra_condition);

  // --- instructions ----------------------------------------------------------
  void EmitInstruction(uint32_t off, int depth);
  // ADD..GE, DIV, MOD, BIT_AND..SHR: the integer fast path inline, else the runtime.
  void EmitArithmetic(Opcode op, uint32_t off, int depth);
  LValue* IntFastPath(Opcode op, LValue* a, LValue* c);  // both tagged ints
  void EmitEquality(Opcode op, int depth);
  // Field or element `index` (untagged) of `obj`, past `header_size`: a
  // release store of the top operand with its card mark, or an acquire load
  // that replaces the operands a read pops (the object, and the index if
  // any: `read_pops`).
  void EmitSlotAccess(LValue* obj, LValue* index, uint64_t header_size, int depth, bool write,
                      int read_pops);
  void EmitField(uint32_t off, int depth, bool write);
  void EmitIndex(uint32_t off, int depth, bool write);
  // The TLAB bump of design 4 for `size` bytes: branches to `slow` when
  // top + size passes current_end (the TLAB is full or a sample is due),
  // else continues in `fast`, where it has bumped top, stored the class
  // pointer and zeroed the rest, except the first `initialised` bytes of
  // the body, which the caller stores before any GC point; returns the
  // object's address (the old top).
  LValue* EmitTlabBump(LValue* size, const Klass* klass, BasicBlock* slow, BasicBlock* fast,
                       uint64_t initialised);
  void EmitNew(uint32_t off, int depth);
  // How many of the fields of the object NEW at `off` allocates are stored
  // (by INIT_FIELDS) with no GC point between: those need no zeroing.
  uint64_t FilledBeforeAnyGcPoint(uint32_t off) const;
  // The inline fast path of array(n) / bytes(n): the current block branches
  // to the returned block with the new object as the operand, or stays
  // (positioned on the slow path) for the built-in call to follow.
  BasicBlock* EmitNewArrayFastPath(int depth, bool refs);
  void EmitCall(uint32_t off, int depth);
  // EnterFrame's frame-array and value-stack checks for a call of `callee`
  // whose frame would be `next` at slot `callee_slot` of this body's base,
  // at the CALL at `off` with `n` slots: on overflow, writes the slots home
  // and raises as the interpreter does; else continues, and returns whether
  // the native stack is low there. Optimised code tests once for all sites
  // instead (design 12).
  LValue* EmitFrameChecks(LValue* next, int callee_slot, const Function& callee, int n,
                          uint32_t off);
  // Optimised code's test that covers every call site's checks at once
  // (design 12): true when the frames, slots or native stack the function
  // may need at most are not all there. The same value at every site, so
  // that GVN keeps only the first on each path.
  LValue* EmitNoRoom();
  // Design 10.
  bool Inlinable(const Function& callee);
  void EmitInlinedCall(uint32_t off, int depth, const Function& callee);
  // Run on the callee's generator: emits its body at `outer`'s insertion
  // point, on the frame `frame` (not pushed) with its slots at base_slot_;
  // RETURN stores into `result` and branches to `done`.
  absl::Status EmitInlineBody(IrGenerator& outer, LValue* frame, const std::vector<LValue*>& args,
                              llvm::AllocaInst* result, BasicBlock* done);
  // The body's loop over the bytecode.
  absl::Status EmitInstructions();
  void EmitRuntimeCall(uint32_t off, int depth, bool builtin);
  // Calls a runtime function on the `pops` operands below `depth` that
  // leaves `results` (0 or 1) values in their place and returns nonzero on
  // success; on zero returns kError.
  void EmitSlowOperandCall(llvm::FunctionCallee callee, uint32_t off, int depth, int pops,
                           std::vector<LValue*> leading_args, int results = 1);

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
  const uint32_t hot_threshold_;  // 0: no hotness counting (design 10)

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

  // Set when this generator emits an inlined callee (design 10).
  IrGenerator* outer_ = nullptr;
  // Where this body's frame and slots are relative to the root's: frames
  // above the root's frame, and the index of base_'s slot from the root's
  // base (design 12).
  int frame_depth_ = 0;
  int base_slot_ = 0;
  // Design 12, in the root only: the most frames above its own and slots
  // above its base that any call site needs, and the placeholders in the
  // entry block that become them once the body is emitted.
  int room_frames_ = 0;
  int room_slots_ = 0;
  llvm::Instruction* room_frames_bytes_ = nullptr;
  llvm::Instruction* room_slot_count_ = nullptr;
  LValue* frames_bound_ = nullptr;
  LValue* slots_bound_ = nullptr;
  // Designs 13 and 16: what holds on every path from the activation's
  // start (or a loop header) to the instruction being emitted, computed
  // while the body is emitted in offset order (EmitInstructions).
  struct PathState {
    bool polled = false;         // a real call (which polled) was made
    bool frame_written = false;  // an inlined body's frame has its function and base
    std::vector<bool> home;      // by slot: its home holds its value
    std::vector<bool> is_int;    // by slot: its value is an int (design 17)
    std::vector<bool> is_ref;    // by slot: its value is an object, not null (design 21)
    std::vector<int> copy_of;    // by operand slot: the local it was loaded from, or -1
    void Meet(const PathState& other) {
      polled = polled && other.polled;
      frame_written = frame_written && other.frame_written;
      for (size_t i = 0; i < home.size(); ++i) {
        home[i] = home[i] && other.home[i];
        is_int[i] = is_int[i] && other.is_int[i];
        is_ref[i] = is_ref[i] && other.is_ref[i];
        if (copy_of[i] != other.copy_of[i]) copy_of[i] = -1;
      }
    }
    void Reset(size_t slots) {
      *this = PathState();
      home.assign(slots, false);
      is_int.assign(slots, false);
      is_ref.assign(slots, false);
      copy_of.assign(slots, -1);
    }
    // The slot was written: nothing is known of its new value.
    void Forget(int slot, int num_locals) {
      home[slot] = false;
      is_int[slot] = false;
      is_ref[slot] = false;
      copy_of[slot] = -1;
      if (slot < num_locals) {
        for (size_t j = num_locals; j < copy_of.size(); ++j) {
          if (copy_of[j] == slot) copy_of[j] = -1;
        }
      }
    }
    // Design 17: the slot's value is an int on every path on from here,
    // and so is the local's it was loaded from.
    void ProveInt(int slot) {
      is_int[slot] = true;
      if (copy_of[slot] >= 0) is_int[copy_of[slot]] = true;
    }
    // Design 21: likewise, an object.
    void ProveRef(int slot) {
      is_ref[slot] = true;
      if (copy_of[slot] >= 0) is_ref[copy_of[slot]] = true;
    }
  };
  PathState path_;
  // The generator of the function being compiled, at the end of outer_.
  IrGenerator& Root() { return outer_ == nullptr ? *this : outer_->Root(); }
  llvm::AllocaInst* inline_result_ = nullptr;
  std::vector<bool> args_int_;  // which arguments the caller knew to be ints (design 17)
  BasicBlock* inline_done_ = nullptr;
  std::vector<InlinedCall> inlined_calls_;
  absl::Status inline_status_;  // the first inlining that failed
  size_t inlined_bytes_ = 0;    // against kInlineBudget
  // Design 20: the slots under the arguments of the inlined call whose body
  // is being emitted.
  int inlined_call_below_ = 0;
  // Design 19. In the root: a call of the function itself returns an int
  // (assumed), and that assumption was used. In every body: some RETURN's
  // value is not known to be an int.
  bool assume_self_returns_int_ = false;
  bool assumed_self_returns_int_ = false;
  bool returns_non_int_ = false;
};

void IrGenerator::DeclareRuntime() {
#define MINIVM_JIT_DECLARE(id, symbol, ret, params) \
  runtime_[static_cast<int>(RuntimeFunction::id)] = \
      module_->getOrInsertFunction(#symbol, RuntimeFunctionType<decltype(symbol)>::Get(ctx_));
  MINIVM_JIT_RUNTIME(MINIVM_JIT_DECLARE)
#undef MINIVM_JIT_DECLARE
  for (llvm::FunctionCallee& c : runtime_) {
    if (auto* f = llvm::dyn_cast<llvm::Function>(c.getCallee())) {
      f->addFnAttr(llvm::Attribute::NoUnwind);  // all are noexcept (runtime.h, 3)
    }
  }
  // Equality of Strings is pure: it neither writes memory the caller can
  // see nor reaches a safepoint.
  if (auto* f = llvm::dyn_cast<llvm::Function>(Rt(kEqual).getCallee())) {
    f->setOnlyReadsMemory();
    f->setWillReturn();
  }
  frameaddress_ = llvm::Intrinsic::getDeclaration(module_, llvm::Intrinsic::frameaddress, {ptr_});
}

LValue* IrGenerator::LoadField(LValue* p, uint64_t off, llvm::Type* ty, llvm::MDNode* tbaa) {
  llvm::LoadInst* load = b_.CreateAlignedLoad(ty, ByteOffset(p, off), llvm::Align(8));
  if (tbaa != nullptr) load->setMetadata(llvm::LLVMContext::MD_tbaa, tbaa);
  return load;
}

void IrGenerator::StoreField(LValue* v, LValue* p, uint64_t off, llvm::MDNode* tbaa) {
  llvm::StoreInst* store = b_.CreateAlignedStore(v, ByteOffset(p, off), llvm::Align(8));
  if (tbaa != nullptr) store->setMetadata(llvm::LLVMContext::MD_tbaa, tbaa);
}

LValue* IrGenerator::LoadAcquire(LValue* p) {
  llvm::LoadInst* load = b_.CreateAlignedLoad(i64_, p, llvm::Align(8));
  load->setAtomic(llvm::AtomicOrdering::Acquire);
  return load;
}

void IrGenerator::StoreRelease(LValue* v, LValue* p) {
  llvm::StoreInst* store = b_.CreateAlignedStore(v, p, llvm::Align(8));
  store->setAtomic(llvm::AtomicOrdering::Release);
}

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
    // An inlined callee's frame exists from its first GC point on (design
    // 10); the caller wrote its own slots and pc at the call.
    StoreField(ConstPtr(&fn_), frame_, kFrameFn, tbaa_frame_);
    StoreField(HomeAddr(0), frame_, kFrameBase, tbaa_frame_);
  }
}

uint32_t IrGenerator::Spill(int n, uint32_t off, bool at_call, int keep_from) {
  WriteInlinedFrame();
  // Design 15: at a call the callee's GC points say where the stack ends.
  if (!at_call) StoreField(frame_, thread_, kThreadFp, tbaa_thread_);
  // Design 20: a call leaves out the proven ints among the first
  // kMaskSlots slots under its arguments, and says so in the pc word.
  uint32_t mask = 0;
  if (at_call && reinterpret_cast<uintptr_t>(code_ + fn_.code.size()) <= Frame::kPcBits) {
    for (int i = 0; i < std::min({n, keep_from, Frame::kMaskSlots}); ++i) {
      if (path_.is_int[i] && !path_.home[i]) mask |= uint32_t{1} << i;
    }
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
    if (path_.home[i] || InMask(skip, i)) continue;  // designs 16 and 20
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

void IrGenerator::ReturnIfNonZero(LValue* status) {
  BasicBlock* fail = NewBlock("propagate");
  BasicBlock* ok = NewBlock("ok");
  CondBrUnlikely(b_.CreateICmpNE(status, b_.getInt32(0)), fail, ok);
  b_.SetInsertPoint(fail);
  b_.CreateRet(b_.CreateShl(b_.CreateZExt(status, i64_), 1));  // Sentinel(status)
  b_.SetInsertPoint(ok);
}

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
  // (design 8). Its result, or sentinel, is this activation's.
  b_.SetInsertPoint(transfer);
  std::vector<LValue*> args = {thread_, frame_, b_.getInt32(entry)};
  for (int i = 0; i < RegisterArgs(fn_.arity); ++i) {
    args.push_back(entry == 0 ? Get(i) : Const64(0));
  }
  // Through jit_code, so in the C convention, as quick code's own.
  b_.CreateRet(b_.CreateCall(llvm_fn_->getFunctionType(), code, args));
  b_.SetInsertPoint(cont);
}

void IrGenerator::EmitCardMark(LValue* holder, LValue* stored, LValue* extra_condition) {
  LValue* cond = IsRef(stored);
  if (extra_condition != nullptr) cond = b_.CreateAnd(cond, extra_condition);
  BasicBlock* mark = NewBlock("card");
  BasicBlock* cont = NewBlock("carded");
  b_.CreateCondBr(cond, mark, cont);
  b_.SetInsertPoint(mark);
  LValue* card = b_.CreateInBoundsGEP(i8_, cards_, b_.CreateLShr(holder, gc::kCardShift));
  llvm::StoreInst* s = b_.CreateAlignedStore(b_.getInt8(gc::kDirtyCard), card, llvm::Align(1));
  s->setAtomic(llvm::AtomicOrdering::Monotonic);
  b_.CreateBr(cont);
  b_.SetInsertPoint(cont);
}

void IrGenerator::EmitSlowOperandCall(llvm::FunctionCallee callee, uint32_t off, int depth,
                                      int pops, std::vector<LValue*> leading_args, int results) {
  const int n = fn_.num_locals + depth;
  Spill(n, off);
  leading_args.push_back(HomeAddr(n - pops));
  LValue* ok = b_.CreateCall(callee, leading_args);
  BasicBlock* fail = NewBlock("raised");
  BasicBlock* cont = NewBlock("slow_done");
  CondBrUnlikely(b_.CreateICmpEQ(ok, b_.getInt32(0)), fail, cont);
  b_.SetInsertPoint(fail);
  ReturnError();
  b_.SetInsertPoint(cont);
  for (int k = n - pops; k < n - pops + results; ++k) path_.Forget(k, fn_.num_locals);
  Reload(n - pops + results);
}

LValue* IrGenerator::IntFastPath(Opcode op, LValue* a, LValue* c) {
  switch (op) {
    case Opcode::ADD:  // bits(a) + bits(b) - 1 wraps at 63 bits
      return b_.CreateSub(b_.CreateAdd(a, c), Const64(1));
    case Opcode::SUB:
      return b_.CreateAdd(b_.CreateSub(a, c), Const64(1));
    case Opcode::MUL:
      return Tag(b_.CreateMul(Untag(a), Untag(c)));
    case Opcode::DIV:
      return Tag(b_.CreateSDiv(Untag(a), Untag(c)));
    case Opcode::MOD:
      return Tag(b_.CreateSRem(Untag(a), Untag(c)));
    // Bitwise: as the interpreter, on the tagged bits; shifts untag and mask
    // the count to 6 bits (so LLVM's shift is never poison).
    case Opcode::BIT_AND:
      return b_.CreateAnd(a, c);
    case Opcode::BIT_OR:
      return b_.CreateOr(a, c);
    case Opcode::BIT_XOR:
      return b_.CreateOr(b_.CreateXor(a, c), Const64(1));
    case Opcode::SHL:
      return Tag(b_.CreateShl(Untag(a), b_.CreateAnd(Untag(c), Const64(63))));
    case Opcode::SHR:
      return Tag(b_.CreateAShr(Untag(a), b_.CreateAnd(Untag(c), Const64(63))));
    case Opcode::LT:  // the tag bit does not change the order
      return TagBool(b_.CreateICmpSLT(a, c));
    case Opcode::LE:
      return TagBool(b_.CreateICmpSLE(a, c));
    case Opcode::GT:
      return TagBool(b_.CreateICmpSGT(a, c));
    default:
      return TagBool(b_.CreateICmpSGE(a, c));
  }
}

void IrGenerator::EmitArithmetic(Opcode op, uint32_t off, int depth) {
  LValue* a = Operand(depth, -2);
  LValue* c = Operand(depth, -1);
  const bool divides = op == Opcode::DIV || op == Opcode::MOD;
  const int left = fn_.num_locals + depth - 2;
  const int left_copy_of = path_.copy_of[left];
  if (!divides && path_.is_int[left] && path_.is_int[left + 1]) {
    // Design 17: two ints, so the fast path is the only path.
    SetOperand(depth, -2, IntFastPath(op, a, c));
    path_.ProveInt(left);
    return;
  }
  BasicBlock* fast = NewBlock("int");
  BasicBlock* slow = NewBlock(divides ? "divmod_slow" : "binary_slow");
  BasicBlock* done = NewBlock(divides ? "divmod_done" : "binary_done");
  LValue* on_fast_path = BothInt(a, c);
  // Only positive divisors on the fast path, as in the interpreter: 0 is an
  // error and -1 may overflow; the runtime handles both.
  if (divides) on_fast_path = b_.CreateAnd(on_fast_path, b_.CreateICmpSGT(c, Const64(1)));
  CondBrUnlikely(b_.CreateNot(on_fast_path), slow, fast);
  b_.SetInsertPoint(fast);
  SetOperand(depth, -2, IntFastPath(op, a, c));
  b_.CreateBr(done);
  b_.SetInsertPoint(slow);
  if (BinarySlowCanSucceed(op)) {
    EmitSlowOperandCall(Rt(kBinary), off, depth, 2, {thread_, b_.getInt32(static_cast<int>(op))});
    b_.CreateBr(done);
  } else {
    // Design 14: a non-int operand, which the runtime raises on; nothing
    // comes back to reload or to merge with the fast path.
    const int n = fn_.num_locals + depth;
    Spill(n, off);
    b_.CreateCall(Rt(kBinary), {thread_, b_.getInt32(static_cast<int>(op)), HomeAddr(n - 2)});
    ReturnError();
  }
  b_.SetInsertPoint(done);
  // Design 17: only ADD goes on with operands that are not ints (Strings),
  // so after any other both operands were ints, and so is the result.
  if (op != Opcode::ADD) {
    path_.ProveInt(left + 1);
    // The left operand's slot holds the result now; the local it was
    // loaded from is as SetOperand found it.
    if (left_copy_of >= 0) path_.is_int[left_copy_of] = true;
    path_.ProveInt(left);
  }
}

void IrGenerator::EmitEquality(Opcode op, int depth) {
  LValue* a = Operand(depth, -2);
  LValue* c = Operand(depth, -1);
  BasicBlock* entry = b_.GetInsertBlock();
  BasicBlock* refs = NewBlock("eq_refs");
  BasicBlock* done = NewBlock("eq_done");
  LValue* same = b_.CreateICmpEQ(a, c);
  b_.CreateCondBr(b_.CreateAnd(b_.CreateNot(same), b_.CreateAnd(IsRef(a), IsRef(c))), refs, done);
  b_.SetInsertPoint(refs);
  LValue* strings_equal = b_.CreateICmpNE(b_.CreateCall(Rt(kEqual), {a, c}), b_.getInt32(0));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  llvm::PHINode* equal = b_.CreatePHI(b_.getInt1Ty(), 2);
  equal->addIncoming(same, entry);
  equal->addIncoming(strings_equal, refs);
  SetOperand(depth, -2,
             TagBool(op == Opcode::EQ ? static_cast<LValue*>(equal) : b_.CreateNot(equal)));
  path_.ProveInt(fn_.num_locals + depth - 2);
}

void IrGenerator::EmitSlotAccess(LValue* obj, LValue* index, uint64_t header_size, int depth,
                                 bool write, int read_pops) {
  LValue* addr = b_.CreateInBoundsGEP(i8_, AsPtr(obj),
                                      b_.CreateAdd(b_.CreateShl(index, 3), Const64(header_size)));
  if (write) {
    LValue* v = Operand(depth, -1);
    StoreRelease(v, addr);
    EmitCardMark(obj, v, nullptr);
  } else {
    SetOperand(depth, -read_pops, LoadAcquire(addr));
  }
}

void IrGenerator::EmitField(uint32_t off, int depth, bool write) {
  const uint8_t* pc = code_ + off;
  const uint32_t symbol = ReadU32(pc + 1);
  FieldCache* cache = &fn_.field_caches[ReadU32(pc + 5)];
  const int obj_slot = fn_.num_locals + depth + (write ? -2 : -1);
  LValue* obj = Get(obj_slot);

  BasicBlock* is_ref = NewBlock("field_ref");
  BasicBlock* check_cache = NewBlock("field_cache");
  BasicBlock* miss = NewBlock("field_miss");
  BasicBlock* hit = NewBlock("field_hit");
  if (path_.is_ref[obj_slot]) {  // design 21
    b_.CreateBr(is_ref);
  } else {
    CondBrUnlikely(b_.CreateNot(IsRef(obj)), miss, is_ref);
  }

  // The cache as it is now: a warm site gets its class and slot as
  // constants, checked first; the shared cache word is the fallback.
  b_.SetInsertPoint(is_ref);
  LValue* klass = b_.CreatePtrToInt(LoadField(AsPtr(obj), 0, ptr_, tbaa_object_), i64_);
  const uint64_t word =
      reinterpret_cast<const std::atomic<uint64_t>*>(cache)->load(std::memory_order_relaxed);
  static_assert(sizeof(FieldCache) == sizeof(std::atomic<uint64_t>));
  llvm::PHINode* slot = nullptr;
  BasicBlock* warm_hit = nullptr;
  if (word != 0) {
    warm_hit = NewBlock("field_warm");
    b_.CreateCondBr(b_.CreateICmpEQ(klass, Const64(word >> 16)), warm_hit, check_cache);
    b_.SetInsertPoint(warm_hit);
    b_.CreateBr(hit);
  } else {
    b_.CreateBr(check_cache);
  }
  b_.SetInsertPoint(check_cache);
  llvm::LoadInst* w = b_.CreateAlignedLoad(i64_, ConstPtr(cache), llvm::Align(8));
  w->setAtomic(llvm::AtomicOrdering::Monotonic);
  LValue* cached_slot = b_.CreateAnd(w, Const64(0xFFFF));
  CondBrUnlikely(b_.CreateICmpNE(b_.CreateLShr(w, 16), klass), miss, hit);
  BasicBlock* cache_block = b_.GetInsertBlock();

  b_.SetInsertPoint(miss);
  const int n = fn_.num_locals + depth;
  Spill(n, off);
  LValue* resolved = b_.CreateCall(Rt(kFieldSlot), {thread_, obj, b_.getInt32(symbol),
                                                    ConstPtr(cache), b_.getInt32(write ? 1 : 0)});
  BasicBlock* fail = NewBlock("raised");
  BasicBlock* resolved_block = NewBlock("field_resolved");
  CondBrUnlikely(b_.CreateICmpSLT(resolved, Const64(0)), fail, resolved_block);
  b_.SetInsertPoint(fail);
  ReturnError();
  // ResolveField never allocates or stops, so obj and every slot are still
  // valid: no reload.
  b_.SetInsertPoint(resolved_block);
  b_.CreateBr(hit);

  b_.SetInsertPoint(hit);
  slot = b_.CreatePHI(i64_, 3);
  if (warm_hit != nullptr) slot->addIncoming(Const64(word & 0xFFFF), warm_hit);
  slot->addIncoming(cached_slot, cache_block);
  slot->addIncoming(resolved, resolved_block);
  // Every way here found an object with the field (ResolveField raises
  // for anything else), and so does the local obj was loaded from.
  path_.ProveRef(obj_slot);
  EmitSlotAccess(obj, slot, gc::kHeaderSize, depth, write, /*read_pops=*/1);
}

void IrGenerator::EmitIndex(uint32_t off, int depth, bool write) {
  const int at = write ? -3 : -2;
  LValue* obj = Operand(depth, at);
  LValue* index = Operand(depth, at + 1);
  BasicBlock* is_ref = NewBlock("index_ref");
  BasicBlock* is_array = NewBlock("index_array");
  BasicBlock* fast = NewBlock("index_fast");
  BasicBlock* slow = NewBlock("index_slow");
  BasicBlock* done = NewBlock("index_done");
  CondBrUnlikely(b_.CreateNot(b_.CreateAnd(IsRef(obj), IsInt(index))), slow, is_ref);
  b_.SetInsertPoint(is_ref);
  LValue* klass = b_.CreatePtrToInt(LoadField(AsPtr(obj), 0, ptr_, tbaa_object_), i64_);
  BasicBlock* not_array = NewBlock("index_not_array");
  CondBrUnlikely(b_.CreateICmpNE(klass, Const64(reinterpret_cast<uint64_t>(ArrayKlass()))),
                 not_array, is_array);
  b_.SetInsertPoint(is_array);
  // The length word is immutable once the array is published.
  LValue* length = LoadField(AsPtr(obj), gc::kHeaderSize, i64_, tbaa_object_);
  LValue* i = Untag(index);
  CondBrUnlikely(b_.CreateICmpUGE(i, length), slow, fast);
  b_.SetInsertPoint(fast);
  EmitSlotAccess(obj, i, gc::kArrayHeaderSize, depth, write, /*read_pops=*/2);
  b_.CreateBr(done);

  // Bytes: one byte per element after the length word, relaxed loads and
  // stores as the interpreter's (vm/runtime/shared_slots.h); a stored value
  // must be an int in 0..255, else the slow path raises. No card mark: a
  // byte is never a reference.
  b_.SetInsertPoint(not_array);
  BasicBlock* is_bytes = NewBlock("index_bytes");
  BasicBlock* bytes_fast = NewBlock("index_bytes_fast");
  CondBrUnlikely(b_.CreateICmpNE(klass, Const64(reinterpret_cast<uint64_t>(BytesKlass()))), slow,
                 is_bytes);
  b_.SetInsertPoint(is_bytes);
  LValue* byte_length = LoadField(AsPtr(obj), gc::kHeaderSize, i64_, tbaa_object_);
  LValue* bi = Untag(index);
  LValue* in_range = b_.CreateICmpULT(bi, byte_length);
  LValue* stored = write ? Operand(depth, -1) : nullptr;
  if (write) {  // an int whose untagged value is 0..255 (unsigned compare)
    in_range = b_.CreateAnd(
        in_range, b_.CreateAnd(IsInt(stored), b_.CreateICmpULE(Untag(stored), Const64(255))));
  }
  CondBrUnlikely(b_.CreateNot(in_range), slow, bytes_fast);
  b_.SetInsertPoint(bytes_fast);
  LValue* byte_addr =
      b_.CreateInBoundsGEP(i8_, AsPtr(obj), b_.CreateAdd(bi, Const64(gc::kArrayHeaderSize)));
  if (write) {
    llvm::StoreInst* s =
        b_.CreateAlignedStore(b_.CreateTrunc(Untag(stored), i8_), byte_addr, llvm::Align(1));
    s->setAtomic(llvm::AtomicOrdering::Monotonic);
  } else {
    llvm::LoadInst* l = b_.CreateAlignedLoad(i8_, byte_addr, llvm::Align(1));
    l->setAtomic(llvm::AtomicOrdering::Monotonic);
    SetOperand(depth, -2, Tag(b_.CreateZExt(l, i64_)));
  }
  b_.CreateBr(done);
  b_.SetInsertPoint(slow);
  if (write) {
    EmitSlowOperandCall(Rt(kSetIndex), off, depth, 3, {thread_}, /*results=*/0);
  } else {
    EmitSlowOperandCall(Rt(kGetIndex), off, depth, 2, {thread_});
  }
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

LValue* IrGenerator::EmitTlabBump(LValue* size, const Klass* klass, BasicBlock* slow,
                                  BasicBlock* fast, uint64_t initialised) {
  LValue* top = LoadField(thread_, kTlabTop, i64_, tbaa_thread_);
  LValue* new_top = b_.CreateAdd(top, size);
  LValue* limit = LoadField(thread_, kTlabCurrentEnd, i64_, tbaa_thread_);
  CondBrUnlikely(b_.CreateICmpUGT(new_top, limit), slow, fast);
  b_.SetInsertPoint(fast);
  StoreField(new_top, thread_, kTlabTop, tbaa_thread_);
  StoreField(ConstPtr(klass), AsPtr(top), 0, tbaa_object_);
  // The gc_word and the body are zeroed here: a TLAB holds stale bytes
  // (gc/tlab.h). A constant size becomes a few plain stores; a variable one
  // (an array) is a call to memset. The body bytes NEW's arguments fill are
  // left out: no collection, stack walk or other thread can see the object
  // before those stores (no GC point comes between, and it is published
  // only by a later release store). Zeroing them too cost two stores per
  // two-field object: the arguments' stores, after the merge with the slow
  // path, go through a pointer that dead-store elimination cannot match.
  auto zero = [&](uint64_t from, LValue* bytes) {
    llvm::CallInst* set = b_.CreateMemSet(b_.CreateConstInBoundsGEP1_64(i8_, AsPtr(top), from),
                                          b_.getInt8(0), bytes, llvm::MaybeAlign(sizeof(void*)));
    set->setMetadata(llvm::LLVMContext::MD_tbaa, tbaa_object_);
  };
  if (initialised == 0) {
    zero(sizeof(void*), b_.CreateSub(size, Const64(sizeof(void*))));
  } else {  // NEW, whose size is a constant
    const uint64_t bytes = llvm::cast<llvm::ConstantInt>(size)->getZExtValue();
    const uint64_t rest = gc::kHeaderSize + initialised;
    zero(sizeof(void*), Const64(gc::kHeaderSize - sizeof(void*)));  // the gc_word
    if (bytes > rest) zero(rest, Const64(bytes - rest));            // fields past the arguments
  }
  return top;
}

uint64_t IrGenerator::FilledBeforeAnyGcPoint(uint32_t off) const {
  // NEW allocates before its arguments are evaluated (bytecode_generator.cc,
  // CompileNew), so its fields are usually stored only after calls that can
  // collect: those must find them zeroed. When the arguments are constants
  // and variables, nothing between NEW and INIT_FIELDS is a GC point, a
  // block entry or a side exit, and the fields they fill need no zeroing.
  const uint8_t* pc = code_ + off;
  uint32_t at = off + OpcodeLength(Opcode::NEW);
  int pushed = 0;
  while (at < fn_.code.size() && !verified_.is_leader[at]) {
    switch (static_cast<Opcode>(code_[at])) {
      case Opcode::PUSH_INT:
      case Opcode::PUSH_NULL:
      case Opcode::PUSH_STRING:
      case Opcode::LOAD_LOCAL:
      case Opcode::LOAD_GLOBAL:
        ++pushed;
        break;
      case Opcode::INIT_FIELDS:
        // The same class, and exactly the values pushed since NEW.
        return ReadU32(code_ + at + 1) == ReadU32(pc + 1) && code_[at + 5] == pushed ? pushed : 0;
      default:
        return 0;
    }
    at += OpcodeLength(static_cast<Opcode>(code_[at]));
  }
  return 0;
}

void IrGenerator::EmitNew(uint32_t off, int depth) {
  const uint8_t* pc = code_ + off;
  const Klass* klass = program_.classes[ReadU32(pc + 1)].get();
  const int argc = pc[5];
  const uint64_t size = gc::FieldsObjectSize(klass->field_count);
  const int n = fn_.num_locals + depth;

  BasicBlock* slow = NewBlock("new_slow");
  BasicBlock* done = NewBlock("new_done");
  BasicBlock* fast = nullptr;
  LValue* top = nullptr;
  if (size <= gc::kMaxTlabObjectSize) {
    // The TLAB fast path (design 4): no sampling logic, by construction.
    fast = NewBlock("new_fast");
    top = EmitTlabBump(Const64(size), klass, slow, fast, 8 * FilledBeforeAnyGcPoint(off));
    b_.CreateBr(done);
  } else {
    b_.CreateBr(slow);
  }
  b_.SetInsertPoint(slow);
  Spill(n, off);
  LValue* obj_slow = b_.CreateCall(Rt(kNew), {thread_, ConstPtr(klass), Const64(size)});
  BasicBlock* fail = NewBlock("raised");
  BasicBlock* allocated = NewBlock("new_allocated");
  CondBrUnlikely(b_.CreateICmpEQ(obj_slow, llvm::ConstantPointerNull::get(ptr_)), fail, allocated);
  b_.SetInsertPoint(fail);
  ReturnError();
  b_.SetInsertPoint(allocated);
  LValue* obj_slow_bits = b_.CreatePtrToInt(obj_slow, i64_);
  Reload(n);  // the arguments may have moved
  b_.CreateBr(done);

  b_.SetInsertPoint(done);
  llvm::PHINode* obj = b_.CreatePHI(i64_, 2);
  llvm::PHINode* from_slow = b_.CreatePHI(b_.getInt1Ty(), 2);
  if (fast != nullptr) {
    obj->addIncoming(top, fast);
    from_slow->addIncoming(b_.getFalse(), fast);
  }
  obj->addIncoming(obj_slow_bits, allocated);
  from_slow->addIncoming(b_.getTrue(), allocated);
  // Initialising stores are plain (the object is not yet reachable by any
  // other thread); the release store that publishes it orders them.
  for (int i = 0; i < argc; ++i) {
    LValue* v = Operand(depth, -argc + i);
    StoreField(v, AsPtr(obj), gc::kHeaderSize + 8 * static_cast<uint64_t>(i), tbaa_object_);
    EmitCardMark(obj, v, from_slow);
  }
  SetOperand(depth, -argc, obj);
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
    // Design 12: one test for the whole function; without room the
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

void IrGenerator::EmitCall(uint32_t off, int depth) {
  const uint8_t* pc = code_ + off;
  const Function* callee = program_.functions[ReadU32(pc + 1)].get();
  const int argc = pc[5];  // == callee->arity (verified)
  const int n = fn_.num_locals + depth;
  const int below = n - argc;  // the caller's slots under the arguments
  const int in_registers = RegisterArgs(argc);
  // The caller's own slots go home, and its pc is its return point, as in
  // the interpreter; the arguments stay in registers (design 8). t->fp and
  // t->sp are the callee's to write (design 15).
  const uint32_t call_mask = Spill(n - in_registers, off, /*at_call=*/true, /*keep_from=*/below);
  // Push the callee's frame: EnterFrame's checks, inline. Before the poll:
  // the poll reads back only the arguments, so after a collection there
  // the registers of the slots below are stale until the call's reload,
  // and the checks' failure path must not write them home.
  LValue* next = b_.CreateConstInBoundsGEP1_64(i8_, frame_, sizeof(Frame));
  LValue* callee_base = HomeAddr(below);
  LValue* native_low = EmitFrameChecks(next, below, *callee, n, off);
  // The poll's cold path writes the arguments home too, since a collection
  // there must see them, and reads them back; the slots below are read
  // back after the call. Design 13: optimised code polls at the first real
  // call on each path.
  if (Root().hot_threshold_ != 0 || !path_.polled) EmitPoll(n, off, n - in_registers, call_mask);
  path_.polled = true;
  std::vector<LValue*> args;
  for (int k = 0; k < argc; ++k) args.push_back(Get(below + k));
  StoreField(ConstPtr(callee), next, kFrameFn, tbaa_frame_);
  StoreField(callee_base, next, kFrameBase, tbaa_frame_);

  // The callee's body if it is compiled and the native stack has room.
  LValue* target;
  if (callee == &Root().fn_) {  // self-recursion, maybe from an inlined copy
    target = llvm_fn_;
  } else {
    // Optimised code calls bodies in its own convention, quick code C
    // entries (design 8).
    const bool optimised = Root().hot_threshold_ == 0;
    llvm::LoadInst* code = b_.CreateAlignedLoad(
        ptr_, optimised ? ConstPtr(&callee->jit_body) : ConstPtr(&callee->jit_code),
        llvm::Align(8));
    code->setAtomic(llvm::AtomicOrdering::Acquire);
    target = code;
  }
  LValue* interpret =
      b_.CreateOr(native_low, b_.CreateICmpEQ(target, llvm::ConstantPointerNull::get(ptr_)));
  BasicBlock* compiled = NewBlock("call_compiled");
  BasicBlock* interpreted = NewBlock("call_interpreted");
  BasicBlock* returned = NewBlock("call_returned");
  CondBrUnlikely(interpret, interpreted, compiled);

  b_.SetInsertPoint(compiled);
  std::vector<LValue*> call_args = {thread_, next, b_.getInt32(0)};
  call_args.insert(call_args.end(), args.begin(), args.begin() + in_registers);
  llvm::CallInst* result_compiled = b_.CreateCall(CodeType(argc), target, call_args);
  result_compiled->setCallingConv(llvm_fn_->getCallingConv());  // the tier's (design 8)
  BasicBlock* compiled_end = b_.GetInsertBlock();
  b_.CreateBr(returned);

  // The interpreter, which completes the frame (one call, to keep the IR
  // of every call site small: compile time grows with it).
  b_.SetInsertPoint(interpreted);
  std::vector<LValue*> interpreted_args = {thread_, next};
  for (int k = 0; k < kMaxRegisterArity; ++k) {  // its a0..a5 (runtime.h)
    interpreted_args.push_back(k < in_registers ? args[k] : Const64(0));
  }
  LValue* result_interpreted = b_.CreateCall(Rt(kCallInterpreted), interpreted_args);
  BasicBlock* interpreted_end = b_.GetInsertBlock();
  b_.CreateBr(returned);

  b_.SetInsertPoint(returned);
  llvm::PHINode* result = b_.CreatePHI(i64_, 2);
  result->addIncoming(result_compiled, compiled_end);
  result->addIncoming(result_interpreted, interpreted_end);
  BasicBlock* propagate = NewBlock("propagate");
  BasicBlock* ok = NewBlock("call_ok");
  // Design 19: a call of the function itself returns an int or a sentinel
  // (both sentinels are even), if the assumption holds.
  const bool returns_int = callee == &Root().fn_ && Root().assume_self_returns_int_;
  if (returns_int) Root().assumed_self_returns_int_ = true;
  CondBrUnlikely(returns_int ? b_.CreateNot(IsInt(result)) : IsSentinel(result), propagate, ok);
  b_.SetInsertPoint(propagate);
  b_.CreateRet(result);  // the frames stay as they are, for the trace
  b_.SetInsertPoint(ok);
  if (IrGenerator& root = Root(); root.base_home_ != nullptr) {
    // Design 18: the base again from the frame, so that no address of a
    // slot has to be kept across the call.
    b_.CreateStore(LoadField(root.frame_, kFrameBase, ptr_, tbaa_frame_), root.base_home_);
  }
  Reload(below);  // a collection in the callee may have moved them
  Put(below, result);
  if (returns_int) path_.ProveInt(below);
}

BasicBlock* IrGenerator::EmitNewArrayFastPath(int depth, bool refs) {
  // array(n) / bytes(n) of an int n whose object fits a TLAB: NEW's TLAB
  // fast path (design 4) plus the length word, as gc::Allocate does for the
  // interpreter; EmitTlabBump zeroes the elements (null or 0). Anything
  // else takes the built-in, which raises the errors and is the slow path:
  // not an int, negative (unsigned, above the limit), too large for a TLAB,
  // the TLAB exhausted, or a sample due (current_end is the sample point).
  // No sampling logic here, by construction.
  const uint64_t max_length = refs ? (gc::kMaxTlabObjectSize - gc::kArrayHeaderSize) / 8
                                   : gc::kMaxTlabObjectSize - gc::kArrayHeaderSize;
  LValue* x = Operand(depth, -1);
  BasicBlock* is_int = NewBlock("new_array_int");
  BasicBlock* fits = NewBlock("new_array_fits");
  BasicBlock* fast = NewBlock("new_array_fast");
  BasicBlock* slow = NewBlock("new_array_slow");
  BasicBlock* done = NewBlock("new_array_done");
  CondBrUnlikely(b_.CreateNot(IsInt(x)), slow, is_int);
  b_.SetInsertPoint(is_int);
  LValue* length = Untag(x);
  CondBrUnlikely(b_.CreateICmpUGT(length, Const64(max_length)), slow, fits);
  b_.SetInsertPoint(fits);
  LValue* size =
      refs ? b_.CreateAdd(b_.CreateShl(length, 3), Const64(gc::kArrayHeaderSize))
           : b_.CreateAnd(b_.CreateAdd(length, Const64(gc::kArrayHeaderSize + 7)), Const64(~7ULL));
  LValue* top = EmitTlabBump(size, refs ? ArrayKlass() : BytesKlass(), slow, fast, 0);
  StoreField(length, AsPtr(top), gc::kHeaderSize, tbaa_object_);
  SetOperand(depth, -1, top);
  b_.CreateBr(done);
  b_.SetInsertPoint(slow);
  return done;
}

void IrGenerator::EmitRuntimeCall(uint32_t off, int depth, bool builtin) {
  const uint8_t* pc = code_ + off;
  const int argc = ArgcOperand(pc);
  const int n = fn_.num_locals + depth;
  BasicBlock* done = nullptr;
  if (builtin && static_cast<Builtin>(pc[1]) == Builtin::k_len) {
    // len of an Array, Bytes or String inline: the length word, immutable
    // once the object is published. Anything else raises in the built-in.
    LValue* x = Operand(depth, -1);
    BasicBlock* is_ref = NewBlock("len_ref");
    BasicBlock* fast = NewBlock("len_fast");
    BasicBlock* slow = NewBlock("len_slow");
    done = NewBlock("len_done");
    CondBrUnlikely(b_.CreateNot(IsRef(x)), slow, is_ref);
    b_.SetInsertPoint(is_ref);
    LValue* klass = b_.CreatePtrToInt(LoadField(AsPtr(x), 0, ptr_, tbaa_object_), i64_);
    auto is = [&](const Klass* k) {
      return b_.CreateICmpEQ(klass, Const64(reinterpret_cast<uint64_t>(k)));
    };
    CondBrUnlikely(b_.CreateNot(b_.CreateOr(is(ArrayKlass()),
                                            b_.CreateOr(is(BytesKlass()), is(StringKlass())))),
                   slow, fast);
    b_.SetInsertPoint(fast);
    SetOperand(depth, -1, Tag(LoadField(AsPtr(x), gc::kHeaderSize, i64_, tbaa_object_)));
    b_.CreateBr(done);
    b_.SetInsertPoint(slow);
  } else if (builtin && (static_cast<Builtin>(pc[1]) == Builtin::k_array ||
                         static_cast<Builtin>(pc[1]) == Builtin::k_bytes)) {
    done = EmitNewArrayFastPath(depth, static_cast<Builtin>(pc[1]) == Builtin::k_array);
  }
  Spill(n, off);
  LValue* args = HomeAddr(n - argc);
  if (builtin) {
    LValue* status =
        b_.CreateCall(Rt(kBuiltin), {thread_, b_.getInt32(pc[1]), args, b_.getInt32(argc)});
    ReturnIfNonZero(status);
  } else {
    const Function* callee = program_.functions[ReadU32(pc + 1)].get();
    LValue* ok = b_.CreateCall(Rt(kSpawn), {thread_, ConstPtr(callee), args, b_.getInt32(argc)});
    BasicBlock* fail = NewBlock("raised");
    BasicBlock* cont = NewBlock("spawned");
    CondBrUnlikely(b_.CreateICmpEQ(ok, b_.getInt32(0)), fail, cont);
    b_.SetInsertPoint(fail);
    ReturnError();
    b_.SetInsertPoint(cont);
  }
  path_.Forget(n - argc, fn_.num_locals);  // the result, written home
  Reload(n - argc + 1);
  if (done != nullptr) {
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }
}

void IrGenerator::EmitInstruction(uint32_t off, int depth) {
  const uint8_t* pc = code_ + off;
  const Opcode op = OpAt(off);
  const uint32_t next = off + LenAt(off);
  switch (op) {
    case Opcode::PUSH_INT: {
      const uint64_t bits = ReadV64(pc + 1);
      SetOperand(depth, 0, Const64(bits));
      // Always an int (opcodes.h); the tag bit says so without trusting it.
      if ((bits & 1) != 0) path_.ProveInt(fn_.num_locals + depth);
      break;
    }
    case Opcode::PUSH_NULL:
      SetOperand(depth, 0, Const64(0));
      break;
    case Opcode::PUSH_STRING:
      // A root the collector updates: read it each time.
      SetOperand(depth, 0,
                 LoadField(ConstPtr(&vm_.string_constants()[ReadU32(pc + 1)]), 0, i64_, nullptr));
      break;
    case Opcode::POP:
      break;
    case Opcode::LOAD_LOCAL: {
      const int local = ReadU16(pc + 1);
      const int slot = fn_.num_locals + depth;
      SetOperand(depth, 0, Get(local));
      if (path_.is_int[local]) path_.ProveInt(slot);
      path_.is_ref[slot] = path_.is_ref[local];
      path_.copy_of[slot] = local;
      break;
    }
    case Opcode::STORE_LOCAL: {
      const int local = ReadU16(pc + 1);
      Put(local, Operand(depth, -1));
      if (path_.is_int[fn_.num_locals + depth - 1]) path_.ProveInt(local);
      if (path_.is_ref[fn_.num_locals + depth - 1]) path_.is_ref[local] = true;
      break;
    }
    case Opcode::LOAD_GLOBAL:
      SetOperand(depth, 0, LoadAcquire(ConstPtr(&const_cast<VM&>(vm_).globals()[ReadU32(pc + 1)])));
      break;
    case Opcode::STORE_GLOBAL:
      StoreRelease(Operand(depth, -1), ConstPtr(&const_cast<VM&>(vm_).globals()[ReadU32(pc + 1)]));
      break;
    case Opcode::GET_FIELD:
      EmitField(off, depth, /*write=*/false);
      break;
    case Opcode::SET_FIELD:
      EmitField(off, depth, /*write=*/true);
      break;
    case Opcode::GET_INDEX:
      EmitIndex(off, depth, /*write=*/false);
      break;
    case Opcode::SET_INDEX:
      EmitIndex(off, depth, /*write=*/true);
      break;
    case Opcode::ADD:
    case Opcode::SUB:
    case Opcode::MUL:
    case Opcode::DIV:
    case Opcode::MOD:
    case Opcode::LT:
    case Opcode::LE:
    case Opcode::GT:
    case Opcode::GE:
    case Opcode::BIT_AND:
    case Opcode::BIT_OR:
    case Opcode::BIT_XOR:
    case Opcode::SHL:
    case Opcode::SHR:
      EmitArithmetic(op, off, depth);
      break;
    case Opcode::EQ:
    case Opcode::NE:
      EmitEquality(op, depth);
      break;
    case Opcode::NEG:
    case Opcode::BIT_NOT: {
      LValue* a = Operand(depth, -1);
      BasicBlock* bad = NewBlock("unary_type");
      BasicBlock* ok = NewBlock("unary");
      CondBrUnlikely(b_.CreateNot(IsInt(a)), bad, ok);
      b_.SetInsertPoint(bad);
      Spill(fn_.num_locals + depth, off);
      b_.CreateCall(Rt(kUnaryType), {thread_, b_.getInt32(static_cast<int>(op)), a});
      ReturnError();
      b_.SetInsertPoint(ok);
      // -x is 2 - bits; ~x flips every bit but the tag.
      path_.ProveInt(fn_.num_locals + depth - 1);  // before SetOperand forgets its source
      SetOperand(depth, -1,
                 op == Opcode::NEG ? b_.CreateSub(Const64(2), a) : b_.CreateXor(a, Const64(~1ull)));
      path_.ProveInt(fn_.num_locals + depth - 1);
      break;
    }
    case Opcode::NOT:
      SetOperand(depth, -1, TagBool(b_.CreateNot(IsTruthy(Operand(depth, -1)))));
      path_.ProveInt(fn_.num_locals + depth - 1);  // true and false are ints
      break;
    case Opcode::JUMP:
      b_.CreateBr(blocks_[JumpTargetAt(off)]);
      break;
    case Opcode::JUMP_IF_FALSE:
      b_.CreateCondBr(IsTruthy(Operand(depth, -1)), blocks_[next], blocks_[JumpTargetAt(off)]);
      break;
    case Opcode::LOOP: {
      // The interpreter's pc at this poll is already the loop header.
      const uint32_t target = JumpTargetAt(off);
      EmitPoll(fn_.num_locals + depth, target, /*from=*/0);
      EmitTierUp(fn_.num_locals + depth, target, target + 1);
      b_.CreateBr(blocks_[target]);
      break;
    }
    case Opcode::CALL: {
      const Function& callee = *program_.functions[ReadU32(pc + 1)];
      if (Inlinable(callee)) {
        EmitInlinedCall(off, depth, callee);
      } else {
        EmitCall(off, depth);
      }
      break;
    }
    case Opcode::CALL_BUILTIN:
      EmitRuntimeCall(off, depth, /*builtin=*/true);
      break;
    case Opcode::SPAWN:
      EmitRuntimeCall(off, depth, /*builtin=*/false);
      break;
    case Opcode::NEW:
      EmitNew(off, depth);
      break;
    case Opcode::INIT_FIELDS: {
      // Plain stores (the object is not yet reachable from other threads),
      // with the barrier: a collection while the arguments were evaluated
      // may have promoted the object.
      const int argc = pc[5];
      LValue* obj = Operand(depth, -argc - 1);
      for (int i = 0; i < argc; ++i) {
        LValue* v = Operand(depth, -argc + i);
        StoreField(v, AsPtr(obj), gc::kHeaderSize + 8 * static_cast<uint64_t>(i), tbaa_object_);
        EmitCardMark(obj, v, nullptr);
      }
      break;
    }
    case Opcode::RETURN:
      if (!path_.is_int[fn_.num_locals + depth - 1]) returns_non_int_ = true;  // design 19
      if (outer_ != nullptr) {  // an inlined callee: pop and continue (design 10)
        b_.CreateStore(Operand(depth, -1), inline_result_);
        b_.CreateBr(inline_done_);  // t->fp is not read until a GC point writes it (design 15)
      } else {
        b_.CreateRet(Operand(depth, -1));  // in a register (design 8)
      }
      break;
  }
}

absl::Status IrGenerator::Emit(const std::string& symbol) {
  absl::StatusOr<VerifiedCode> verified = VerifyFunction(program_, fn_);
  if (!verified.ok()) return verified.status();
  verified_ = *std::move(verified);
  DeclareRuntime();
  llvm::MDBuilder md(ctx_);
  unlikely_weights_ = md.createBranchWeights(1, 2000);
  llvm::MDNode* root = md.createTBAARoot("minivm");
  auto tag = [&](const char* name) {
    llvm::MDNode* type = md.createTBAAScalarTypeNode(name, root);
    return md.createTBAAStructTagNode(type, type, 0);
  };
  tbaa_stack_ = tag("value stack slot");
  tbaa_thread_ = tag("thread word");
  tbaa_frame_ = tag("frame word");
  tbaa_object_ = tag("object header or initialising store");

  llvm_fn_ =
      llvm::Function::Create(CodeType(fn_.arity), llvm::Function::ExternalLinkage, symbol, module_);
  if (hot_threshold_ == 0) {
    llvm_fn_->setCallingConv(OptimisedCallingConv(llvm::Triple(module_->getTargetTriple())));
  }
  llvm_fn_->addFnAttr(llvm::Attribute::NoUnwind);
  thread_ = llvm_fn_->getArg(0);
  frame_ = llvm_fn_->getArg(1);
  LValue* entry_id = llvm_fn_->getArg(2);
  thread_->setName("thread");
  frame_->setName("frame");
  entry_id->setName("entry");
  llvm_fn_->addParamAttr(0, llvm::Attribute::NonNull);
  llvm_fn_->addParamAttr(1, llvm::Attribute::NonNull);

  BasicBlock* entry = NewBlock("entry");
  b_.SetInsertPoint(entry);
  const int num_slots = fn_.num_locals + fn_.max_stack;
  path_.Reset(num_slots);
  for (int i = 0; i < num_slots; ++i) slots_.push_back(b_.CreateAlloca(i64_));
  for (int i = 0; i < num_slots; ++i) b_.CreateStore(Const64(0), slots_[i]);
  base_ = LoadField(frame_, kFrameBase, ptr_, tbaa_frame_);
  if (hot_threshold_ == 0) {  // design 18
    base_home_ = b_.CreateAlloca(ptr_);
    b_.CreateStore(base_, base_home_);
  }
  cards_ = LoadField(thread_, kCardTable, ptr_, tbaa_thread_);
  if (hot_threshold_ == 0) {
    // Design 12: the bounds every call site's first test compares, as
    // offsets that become constants once every site has said what it needs.
    llvm::Value* unknown = llvm::PoisonValue::get(i64_);
    room_frames_bytes_ = new llvm::FreezeInst(unknown, "room_frames_bytes", entry);
    room_slot_count_ = new llvm::FreezeInst(unknown, "room_slots", entry);
    frames_bound_ = b_.CreateInBoundsGEP(i8_, frame_, room_frames_bytes_);
    slots_bound_ = b_.CreateInBoundsGEP(i64_, base_, room_slot_count_);
  }

  blocks_.assign(fn_.code.size(), nullptr);
  for (size_t off = 0; off < fn_.code.size(); ++off) {
    if (verified_.is_leader[off] && verified_.depth[off] != VerifiedCode::kUnreachable) {
      blocks_[off] = BasicBlock::Create(ctx_, absl::StrCat("pc", off), llvm_fn_);
    }
  }

  BasicBlock* normal = NewBlock("normal_entry");
  BasicBlock* osr = NewBlock("osr_entry");
  b_.CreateCondBr(b_.CreateICmpEQ(entry_id, b_.getInt32(0)), normal, osr);

  // Normal entry: the caller pushed the frame; the arguments are in
  // registers (or, past kMaxRegisterArity, at base) and the other locals
  // are null (the allocas' initial zeros). No poll: the caller's CALL
  // polled (design 7).
  b_.SetInsertPoint(normal);
  if (RegisterArgs(fn_.arity) == fn_.arity) {
    for (int i = 0; i < fn_.arity; ++i) Put(i, llvm_fn_->getArg(3 + i));
  } else {
    Reload(fn_.arity);
  }
  EmitTierUp(fn_.num_locals, 0, 0);
  b_.CreateBr(blocks_[0]);

  // OSR entries: one per loop header, reloading locals and operands.
  b_.SetInsertPoint(osr);
  BasicBlock* bad_entry = NewBlock("bad_entry");
  llvm::SwitchInst* dispatch = b_.CreateSwitch(entry_id, bad_entry, verified_.loop_headers.size());
  for (uint32_t header : verified_.loop_headers) {
    BasicBlock* block = BasicBlock::Create(ctx_, absl::StrCat("osr", header), llvm_fn_);
    dispatch->addCase(b_.getInt32(header + 1), block);
    b_.SetInsertPoint(block);
    Reload(fn_.num_locals + verified_.depth[header]);
    b_.CreateBr(blocks_[header]);
  }
  b_.SetInsertPoint(bad_entry);
  b_.CreateUnreachable();

  if (absl::Status s = EmitInstructions(); !s.ok()) return s;
  if (hot_threshold_ == 0) {
    room_frames_bytes_->replaceAllUsesWith(b_.getInt64(room_frames_ * sizeof(Frame)));
    room_frames_bytes_->eraseFromParent();
    room_slot_count_->replaceAllUsesWith(b_.getInt64(room_slots_));
    room_slot_count_->eraseFromParent();
  }
  return inline_status_;
}

absl::Status IrGenerator::EmitInstructions() {
  // The path state (designs 13 and 16) flows forward only: JUMP and
  // JUMP_IF_FALSE go forward (the verifier checks it), and LOOP, the only
  // backward edge, enters a loop header, where nothing is known (below).
  // So one pass in offset order sees every other edge into an instruction
  // before it. Per offset, the meet of the forward jumps seen so far into
  // it.
  std::vector<std::optional<PathState>> jumped_in(fn_.code.size());
  std::vector<bool> headers(fn_.code.size(), false);
  for (uint32_t header : verified_.loop_headers) headers[header] = true;
  PathState unknown;
  unknown.Reset(path_.home.size());
  // path_ as the caller set it: nothing known at a function's start, an
  // inlined body's poll state from its caller.
  bool falls_in = true;
  for (uint32_t off = 0; off < fn_.code.size(); off += LenAt(off)) {
    if (verified_.depth[off] == VerifiedCode::kUnreachable) {  // unreachable code
      falls_in = false;
      continue;
    }
    if (blocks_[off] != nullptr) {
      if (b_.GetInsertBlock()->getTerminator() == nullptr) b_.CreateBr(blocks_[off]);
      b_.SetInsertPoint(blocks_[off]);
    }
    if (headers[off]) {
      // Also an on-stack-replacement entry, where the activation (in this
      // code) has not called anything yet.
      path_ = unknown;
    } else if (std::optional<PathState>& in = jumped_in[off]; in.has_value()) {
      if (falls_in) {
        path_.Meet(*in);
      } else {
        path_ = *std::move(in);
      }
    } else if (!falls_in) {
      path_ = unknown;
    }
    jumped_in[off].reset();
    // Slots above the stack are dead: a later push writes them (Put).
    const int depth = verified_.depth[off];
    for (size_t i = fn_.num_locals + depth; i < path_.home.size(); ++i) {
      path_.Forget(static_cast<int>(i), fn_.num_locals);
    }
    EmitInstruction(off, depth);
    const Opcode op = static_cast<Opcode>(code_[off]);
    if (op == Opcode::JUMP || op == Opcode::JUMP_IF_FALSE) {
      std::optional<PathState>& in = jumped_in[JumpTargetAt(off)];
      if (in.has_value()) {
        in->Meet(path_);
      } else {
        in = path_;
      }
    }
    falls_in = op != Opcode::JUMP && op != Opcode::LOOP && op != Opcode::RETURN;
  }
  if (b_.GetInsertBlock()->getTerminator() == nullptr) {
    return absl::InternalError("control falls off the end of the function");
  }
  return absl::OkStatus();
}

namespace {

// Calls of `fn`, in order: CALL targets' indices; nullopt if `fn` spawns or
// loops (never inlined).
std::optional<std::vector<uint32_t>> CallsOfLoopFree(const Function& fn) {
  std::vector<uint32_t> calls;
  for (uint32_t off = 0; off < fn.code.size();
       off += OpcodeLength(static_cast<Opcode>(fn.code[off]))) {
    const Opcode op = static_cast<Opcode>(fn.code[off]);
    if (op == Opcode::SPAWN || op == Opcode::LOOP) return std::nullopt;
    if (op == Opcode::CALL) calls.push_back(ReadU32(fn.code.data() + off + 1));
  }
  return calls;
}

// A small function without calls, loops or spawns.
bool IsSmallLeaf(const Function& fn) {
  if (fn.code.size() > kMaxInlineBytecode) return false;
  std::optional<std::vector<uint32_t>> calls = CallsOfLoopFree(fn);
  return calls.has_value() && calls->empty();
}

}  // namespace

bool IrGenerator::Inlinable(const Function& callee) {
  IrGenerator& root = Root();
  // The quick tier (design 11) compiles for speed of compilation; inlining
  // is the optimising tier's.
  if (root.hot_threshold_ != 0) return false;
  const bool self = &callee == &root.fn_;
  if (callee.code.size() > (self ? kMaxRecursiveInlineBytecode : kMaxInlineBytecode) ||
      root.inlined_bytes_ + callee.code.size() > kInlineBudget) {
    return false;
  }
  int depth = 0;
  int copies = 0;  // of `callee` in the chain of bodies, the root's included
  for (const IrGenerator* g = this; g != nullptr; g = g->outer_) {
    if (g->outer_ != nullptr) ++depth;
    if (&g->fn_ == &callee) ++copies;
  }
  if (depth >= kMaxInlineDepth || copies > kMaxRecursiveInlineLevel) return false;
  std::optional<std::vector<uint32_t>> calls = CallsOfLoopFree(callee);
  if (!calls.has_value()) return false;
  // What the callee calls must inline away too, except in a recursive
  // function's copy of itself: compile time grows with every call site.
  if (!self) {
    for (uint32_t index : *calls) {
      if (!IsSmallLeaf(*program_.functions[index])) return false;
    }
  }
  // Code the verifier refuses stays interpreted, so it is called, not
  // inlined (that would refuse the caller too).
  if (!VerifyFunction(program_, callee).ok()) return false;
  root.inlined_bytes_ += callee.code.size();
  return true;
}

void IrGenerator::EmitInlinedCall(uint32_t off, int depth, const Function& callee) {
  const int argc = code_[off + 5];  // == callee.arity (verified)
  const int n = fn_.num_locals + depth;
  const int below = n - argc;
  // As a call: the caller's slots home and its pc at the CALL, so the
  // callee's GC points need to write only its own frame and t->fp and t->sp
  // (design 15).
  Spill(below, off, /*at_call=*/true, /*keep_from=*/below);
  inlined_call_below_ = below;
  std::vector<LValue*> args;
  for (int k = 0; k < argc; ++k) args.push_back(Get(below + k));
  LValue* next = b_.CreateConstInBoundsGEP1_64(i8_, frame_, sizeof(Frame));
  // EnterFrame's checks, so that the overflow happens where it would. The
  // native stack is not used: the body runs on this function's.
  EmitFrameChecks(next, below, callee, n, off);
  BasicBlock* done = NewBlock("inline_done");
  Root().inlined_calls_.push_back(
      {&callee, outer_ == nullptr ? nullptr : &fn_, fn_.lines.LineFor(off)});
  IrGenerator inner(vm_, callee, module_, /*hot_threshold=*/0);  // no entry, no loops
  inner.frame_depth_ = frame_depth_ + 1;
  inner.base_slot_ = base_slot_ + below;
  // The callee's calls after a poll of the caller's need none; its frame
  // and slots are new.
  inner.path_.polled = path_.polled;
  for (int k = 0; k < argc; ++k) inner.args_int_.push_back(path_.is_int[below + k]);
  if (absl::Status s = inner.EmitInlineBody(*this, next, args, slots_[below], done);
      !s.ok() && inline_status_.ok()) {
    // The whole function then stays interpreted (Emit returns it).
    inline_status_ =
        absl::Status(s.code(), absl::StrCat("inlining ", callee.name, ": ", s.message()));
  }
  b_.SetInsertPoint(done);
  // The slots under the call again: a collection in the body may have
  // moved them.
  Reload(below);
  path_.Forget(below, fn_.num_locals);  // the result, stored by the body's RETURN
  if (!inner.returns_non_int_) path_.ProveInt(below);  // every RETURN's was an int
}

absl::Status IrGenerator::EmitInlineBody(IrGenerator& outer, LValue* frame,
                                         const std::vector<LValue*>& args, llvm::AllocaInst* result,
                                         BasicBlock* done) {
  absl::StatusOr<VerifiedCode> verified = VerifyFunction(program_, fn_);
  if (!verified.ok()) return verified.status();
  verified_ = *std::move(verified);
  outer_ = &outer;
  inline_result_ = result;
  inline_done_ = done;
  llvm_fn_ = outer.llvm_fn_;
  thread_ = outer.thread_;
  frame_ = frame;
  cards_ = outer.cards_;
  unlikely_weights_ = outer.unlikely_weights_;
  tbaa_stack_ = outer.tbaa_stack_;
  tbaa_thread_ = outer.tbaa_thread_;
  tbaa_frame_ = outer.tbaa_frame_;
  tbaa_object_ = outer.tbaa_object_;
  std::copy(std::begin(outer.runtime_), std::end(outer.runtime_), std::begin(runtime_));
  frameaddress_ = outer.frameaddress_;

  // The callee's slots: allocas in the caller's entry block (promoted to
  // registers like the caller's), fresh at each inlined activation.
  IRBuilder<> at_entry(&llvm_fn_->getEntryBlock(), llvm_fn_->getEntryBlock().begin());
  const int num_slots = fn_.num_locals + fn_.max_stack;
  b_.SetInsertPoint(outer.b_.GetInsertBlock());
  const bool polled = path_.polled;  // the caller's (EmitInlinedCall)
  path_.Reset(num_slots);
  path_.polled = polled;
  for (int i = 0; i < num_slots; ++i) {
    slots_.push_back(at_entry.CreateAlloca(i64_));
    Put(i, i < static_cast<int>(args.size()) ? args[i] : Const64(0));
  }
  // What the caller knew of the arguments (design 17).
  for (size_t i = 0; i < args_int_.size(); ++i) {
    if (args_int_[i]) path_.ProveInt(static_cast<int>(i));
  }
  blocks_.assign(fn_.code.size(), nullptr);
  for (size_t off = 0; off < fn_.code.size(); ++off) {
    if (verified_.is_leader[off] && verified_.depth[off] != VerifiedCode::kUnreachable) {
      blocks_[off] = BasicBlock::Create(ctx_, absl::StrCat("inl", fn_.index, "_pc", off), llvm_fn_);
    }
  }
  if (absl::Status s = EmitInstructions(); !s.ok()) return s;
  return inline_status_;  // an inlining within this body that failed
}

}  // namespace

llvm::CallingConv::ID OptimisedCallingConv(const llvm::Triple& target) {
  return target.getArch() == llvm::Triple::x86_64 ? llvm::CallingConv::PreserveNone
                                                  : llvm::CallingConv::C;
}

std::string TrampolineSymbol(Trampoline kind, int register_args) {
  return absl::StrCat(
      kind == Trampoline::kEnterOptimised ? "minivm.enter_optimised." : "minivm.enter_quick.",
      register_args);
}

void EmitTrampolines(llvm::Module* module) {
  llvm::LLVMContext& ctx = module->getContext();
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  const llvm::CallingConv::ID optimised_cc =
      OptimisedCallingConv(llvm::Triple(module->getTargetTriple()));
  // Offsets of the entries in a Function, which is not standard-layout
  // (offsetof is not defined for it), measured on one.
  const Function probe;
  auto offset_of = [&probe](const void* member) {
    return static_cast<uint64_t>(static_cast<const char*>(member) -
                                 reinterpret_cast<const char*>(&probe));
  };
  const uint64_t jit_code = offset_of(&probe.jit_code);
  const uint64_t jit_body = offset_of(&probe.jit_body);
  for (Trampoline kind : {Trampoline::kEnterOptimised, Trampoline::kEnterQuick}) {
    const bool to_body = kind == Trampoline::kEnterOptimised;
    for (int n = 0; n <= kMaxRegisterArity; ++n) {
      llvm::FunctionType* type = CodeTypeOf(ctx, n);
      llvm::Function* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage,
                                                 TrampolineSymbol(kind, n), module);
      f->setCallingConv(to_body ? llvm::CallingConv::ID{llvm::CallingConv::C} : optimised_cc);
      f->addFnAttr(llvm::Attribute::NoUnwind);
      IRBuilder<> b(BasicBlock::Create(ctx, "entry", f));
      // frame->fn->jit_body or ->jit_code: the frame is pushed with its
      // function before any entry is called (program.h).
      LValue* fn = b.CreateAlignedLoad(
          ptr, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), f->getArg(1), kFrameFn), llvm::Align(8));
      llvm::LoadInst* target = b.CreateAlignedLoad(
          ptr, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), fn, to_body ? jit_body : jit_code),
          llvm::Align(8));
      target->setAtomic(llvm::AtomicOrdering::Acquire);
      std::vector<LValue*> args;
      for (llvm::Argument& arg : f->args()) args.push_back(&arg);
      llvm::CallInst* call = b.CreateCall(type, target, args);
      call->setCallingConv(to_body ? optimised_cc : llvm::CallingConv::ID{llvm::CallingConv::C});
      b.CreateRet(call);
    }
  }
}

absl::Status EmitFunction(const VM& vm, const Function& fn, const std::string& symbol,
                          llvm::Module* module, uint32_t hot_threshold,
                          std::vector<InlinedCall>* inlined) {
  // Design 19: optimised code first assumes that the function's calls of
  // itself return ints, and is emitted again without the assumption if its
  // RETURNs do not prove it.
  auto generator = std::make_unique<IrGenerator>(vm, fn, module, hot_threshold);
  if (hot_threshold == 0) generator->AssumeSelfReturnsInt();
  absl::Status s = generator->Emit(symbol);
  if (s.ok() && generator->AssumptionFailed()) {
    llvm::Function* emitted = module->getFunction(symbol);
    emitted->dropAllReferences();  // its own recursive calls
    emitted->eraseFromParent();
    generator = std::make_unique<IrGenerator>(vm, fn, module, hot_threshold);
    s = generator->Emit(symbol);
  }
  if (s.ok() && inlined != nullptr) *inlined = generator->inlined();
  return s;
}

}  // namespace minivm::jit
