// Calls: real calls between compiled functions and into the interpreter,
// inlined calls, returns, the two entries of compiled code and the
// trampolines between them.
//
// Design:
// .call.signature  A compiled function is `i64 f(thread, frame, entry,
//    arg0, ..., argN-1)` (JitEntry in vm/bytecode/program.h; arguments in
//    registers up to kMaxRegisterArity, the rest at the callee's base).
//    entry 0 is the normal entry; entry h + 1 is the on-stack-replacement
//    entry at the loop header h, which reloads the slots from home. The
//    result comes back in rax.
// .call.sentinel  An error or exit comes back as a sentinel that no Value
//    can be (2 or 4: even, so not an int, and below any object address;
//    Sentinel). The runtime raises on the thread; compiled code returns the
//    sentinel up the native chain with the frames untouched, so the trace
//    is the interpreter's.
// .call.real  A real call writes back only the caller's slots below the
//    arguments (frames.cc .frame.write-back, .frame.int-mask), pushes the
//    callee's Frame with EnterFrame's checks (frames.cc .checks.once) and
//    its function and base (its pc is written by its own GC points, the
//    only places it is read), and calls it with the arguments in registers
//    (a direct call for self-recursion, else through Function::jit_code or
//    jit_body). The callee keeps its parameters in registers and writes
//    them home at its GC points like any slot, so the arguments are stored
//    only if a collection can see them. When the callee is not compiled,
//    or (quick code) the native stack is low, the arguments go to the
//    interpreter, which completes the frame (minivm_jit_call_interpreted:
//    one call, to keep every call site's IR small). The interpreter calls
//    compiled code the same way (RunCompiled in vm/runtime/interpreter.cc).
// .call.convention  Two entries, two conventions. Optimised code is emitted
//    with LLVM's preserve_none (OptimisedCallingConv), in which the callee
//    saves no registers, so an optimised caller saves only what it keeps
//    live across the call and a leaf saves nothing; it calls
//    Function::jit_body. Quick code and C++ use the C convention and
//    Function::jit_code. Quick code cannot take preserve_none: fast
//    instruction selection lowers neither its arguments nor its return and
//    falls back to SelectionDAG in every function. Rejected: preserve_none
//    everywhere, with C++ entering through trampolines (the quick tier's
//    fallback above).
// .call.trampolines  The two conventions meet through shared trampolines,
//    one per register arity, linked once (EmitTrampolines): an optimised
//    function's jit_code is enter_optimised.N (C, calls frame->fn->jit_body),
//    a quick function's jit_body is enter_quick.N (preserve_none, calls
//    frame->fn->jit_code). They read the callee's Frame, which every caller
//    has pushed. Rejected: a wrapper compiled per function (more code to
//    compile for every function at eager's start-up).
// .inline  Optimised code inlines the CALLs inline_policy.h chooses: the
//    callee's body is emitted in place by a generator of its own (outer_
//    names the caller's), with its own slots, in the same activation. The
//    caller's slots go home as for a call, and the frame checks stay, so a
//    stack overflow happens at the same depth as in the interpreter. The
//    callee's Frame is written lazily (frames.cc .frame.inlined), so every
//    reader sees the frames of the uninlined call, lines included. Its
//    RETURN stores the result and continues in the caller, whose next GC
//    point makes the caller's frame t->fp again (frames.cc .frame.lazy). A
//    call the inlined body makes is a GC point like any other: it writes
//    the inlined frame first, so the chain of frames is whole below the
//    callee. The quick tier does not inline: it compiles for speed of
//    compilation.
// .return.self-int  What a recursive function returns (optimised tier).
//    Optimised code is first emitted on the assumption that a call of the
//    function itself returns an int when it returns at all, and keeps it
//    only if every RETURN of the function's own body then returns a value
//    the path proves an int (path_state.h .path.int); else it is emitted
//    again without it (EmitFunction). The assumption proves itself by
//    induction on the depth of calls: the deepest completed activation
//    returns through a RETURN whose proof used no call that completed, and
//    each activation above it returns through one whose proof used only
//    completed calls of the function, ints by then. The proof is of the
//    bytecode, so it holds whichever tier runs a call, the interpreter
//    included. A sentinel is even and so not an int: one bit tests a self
//    call's result. An inlined body whose every RETURN returns a proven int
//    gives its caller a proven int (any callee). fib's sum of two calls is
//    then an add alone; bottom_up in binary trees returns objects and is
//    emitted twice (the IR is a small part of a compile).
#include <algorithm>
#include <iterator>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "vm/jit/inline_policy.h"
#include "vm/jit/ir_generator_internal.h"
#include "vm/jit/polls.h"

namespace minivm::jit {

using enum RuntimeFunction;

llvm::FunctionType* CodeTypeOf(llvm::LLVMContext& ctx, int register_args) {
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  std::vector<llvm::Type*> params = {ptr, ptr, llvm::Type::getInt32Ty(ctx)};
  params.insert(params.end(), register_args, i64);
  return llvm::FunctionType::get(i64, params, false);
}

void IrGenerator::EmitCall(uint32_t off, int depth) {
  const uint8_t* pc = code_ + off;
  const Function* callee = program_.functions[ReadU32(pc + 1)].get();
  const int argc = pc[5];  // == callee->arity (verified)
  const int n = fn_.num_locals + depth;
  const int below = n - argc;  // the caller's slots under the arguments
  const int in_registers = RegisterArgs(argc);
  // The caller's own slots go home, and its pc is its return point, as in
  // the interpreter; the arguments stay in registers (.call.signature).
  // t->fp and t->sp are the callee's to write (frames.cc .frame.lazy).
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
  // back after the call. Optimised code polls at the first real call on
  // each path (polls.cc .poll.once).
  if (PollsAtCall(/*optimising=*/Root().hot_threshold_ == 0, path_.polled)) {
    EmitPoll(n, off, n - in_registers, call_mask);
  }
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
    // entries (.call.convention).
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
  result_compiled->setCallingConv(llvm_fn_->getCallingConv());  // the tier's (.call.convention)
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
  // .return.self-int: a call of the function itself returns an int or a sentinel
  // (both sentinels are even), if the assumption holds.
  const bool returns_int = callee == &Root().fn_ && Root().assume_self_returns_int_;
  if (returns_int) Root().assumed_self_returns_int_ = true;
  CondBrUnlikely(returns_int ? b_.CreateNot(IsInt(result)) : IsSentinel(result), propagate, ok);
  b_.SetInsertPoint(propagate);
  b_.CreateRet(result);  // the frames stay as they are, for the trace
  b_.SetInsertPoint(ok);
  if (IrGenerator& root = Root(); root.base_home_ != nullptr) {
    // frames.cc .frame.base: the base again from the frame, so that no address of a
    // slot has to be kept across the call.
    b_.CreateStore(LoadField(root.frame_, kFrameBase, ptr_, tbaa_frame_), root.base_home_);
  }
  Reload(below);  // a collection in the callee may have moved them
  Put(below, result);
  if (returns_int) path_.ProveInt(below);
}

bool IrGenerator::Inlinable(const Function& callee) {
  IrGenerator& root = Root();
  InlineSite site;
  site.optimising = root.hot_threshold_ == 0;
  site.self = &callee == &root.fn_;
  site.inlined_bytes = root.inlined_bytes_;
  for (const IrGenerator* g = this; g != nullptr; g = g->outer_) {
    if (g->outer_ != nullptr) ++site.depth;
    if (&g->fn_ == &callee) ++site.copies;
  }
  if (!ShouldInline(program_, callee, site)) return false;
  root.inlined_bytes_ += callee.code.size();
  return true;
}

void IrGenerator::EmitInlinedCall(uint32_t off, int depth, const Function& callee) {
  const int argc = code_[off + 5];  // == callee.arity (verified)
  const int n = fn_.num_locals + depth;
  const int below = n - argc;
  // As a call: the caller's slots home and its pc at the CALL, so the
  // callee's GC points need to write only its own frame and t->fp and t->sp
  // (frames.cc .frame.lazy).
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
  // What the caller knew of the arguments (path_state.h .path.int).
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

void IrGenerator::EmitReturn(int depth) {
  if (!path_.is_int[fn_.num_locals + depth - 1]) returns_non_int_ = true;  // .return.self-int
  if (outer_ != nullptr) {  // an inlined callee: pop and continue (.inline)
    b_.CreateStore(Operand(depth, -1), inline_result_);
    // t->fp is not read until a GC point writes it (frames.cc .frame.lazy).
    b_.CreateBr(inline_done_);
  } else {
    b_.CreateRet(Operand(depth, -1));  // in a register (.call.signature)
  }
}

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

}  // namespace minivm::jit
