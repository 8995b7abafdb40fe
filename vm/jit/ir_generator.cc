// Bytecode to LLVM IR: the driver and the opcode dispatch.
//
// The code generator is one class, IrGenerator (ir_generator_internal.h),
// whose parts live in one file per concern, each with its design:
//   ir_generator.cc  this file: the function's entries, the pass over the
//                    bytecode, the dispatch of each opcode;
//   path_state.h     what a path knows of each slot, and the meet of paths;
//   frames.cc        write-back, reload, frame records, limit checks;
//   calls.cc         calls, inlining, returns, entries and trampolines
//                    (inline_policy.h: which calls are inlined);
//   allocation.cc    NEW, INIT_FIELDS, array(n) and bytes(n);
//   objects.cc       fields, elements, the write barrier, built-ins;
//   operators.cc     arithmetic, comparisons, equality;
//   polls.cc         safepoint polls and tier-up.
//
// Design:
// .frames.shared  Compiled code runs on the same frames as the interpreter:
//    the Frame and the VM-managed value-stack slots its caller pushed
//    (vm/runtime/thread.h). Stack traces, GetStackTrace and GetLineNumber
//    therefore read the same Frame records in both tiers, and on-stack
//    replacement needs no state conversion: the interpreter stops at a loop
//    header and the compiled code reloads the slots.
// .slots.registers  Each local and operand slot is an LLVM alloca, promoted
//    to an SSA value by SROA. The value stack in memory is the slots' home
//    only at GC points (frames.cc .frame.write-back): the collector finds
//    every reference precisely in [stack_begin, sp) and updates it in
//    place, and no compiled code holds a stale pointer across a moving
//    collection, since nothing lives across a GC point except in those
//    slots (constants such as Klass pointers are not heap objects). No
//    stack maps, no statepoints. Rejected: LLVM's gc.statepoint and stack
//    maps (a relocation pass and a stack-map parser for a tier whose
//    values already have a home); keeping the slots in memory all the time
//    (a store on every push).
// .depth.static  The stack depth is static per instruction (the front end
//    guarantees it and the bytecode verifier, vm/bytecode/verifier.h,
//    re-checks it), so operand slot k is always alloca num_locals + k, and
//    a write-back at depth d writes exactly num_locals + d slots. Code the
//    verifier refuses is not compiled: the function stays interpreted.
// .one-pass  A body is emitted in one pass in bytecode order, which also
//    computes what each path knows (path_state.h .path.flow): each leader
//    gets a block, each instruction its IR. The normal entry takes the
//    arguments (calls.cc .call.signature) and counts hotness (polls.cc
//    .tier-up); each loop header has an OSR entry that reloads the slots.
#include "vm/jit/ir_generator.h"

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "vm/jit/ir_generator_internal.h"

namespace minivm::jit {
namespace {


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

}  // namespace

using enum RuntimeFunction;

void IrGenerator::DeclareRuntime() {
#define MINIVM_JIT_DECLARE(id, symbol, ret, params) \
  runtime_[static_cast<int>(RuntimeFunction::id)] = \
      module_->getOrInsertFunction(#symbol, RuntimeFunctionType<decltype(symbol)>::Get(ctx_));
  MINIVM_JIT_RUNTIME(MINIVM_JIT_DECLARE)
#undef MINIVM_JIT_DECLARE
  for (llvm::FunctionCallee& c : runtime_) {
    if (auto* f = llvm::dyn_cast<llvm::Function>(c.getCallee())) {
      f->addFnAttr(llvm::Attribute::NoUnwind);  // all are noexcept (runtime.h .noexcept)
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

void IrGenerator::ReturnIfNonZero(LValue* status) {
  BasicBlock* fail = NewBlock("propagate");
  BasicBlock* ok = NewBlock("ok");
  CondBrUnlikely(b_.CreateICmpNE(status, b_.getInt32(0)), fail, ok);
  b_.SetInsertPoint(fail);
  b_.CreateRet(b_.CreateShl(b_.CreateZExt(status, i64_), 1));  // Sentinel(status)
  b_.SetInsertPoint(ok);
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
    case Opcode::BIT_NOT:
      EmitUnary(op, off, depth);
      break;
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
    case Opcode::LOOP:
      EmitLoop(off, depth);
      break;
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
    case Opcode::INIT_FIELDS:
      EmitInitFields(off, depth);
      break;
    case Opcode::RETURN:
      EmitReturn(depth);
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
  if (hot_threshold_ == 0) {  // frames.cc .frame.base
    base_home_ = b_.CreateAlloca(ptr_);
    b_.CreateStore(base_, base_home_);
  }
  cards_ = LoadField(thread_, kCardTable, ptr_, tbaa_thread_);
  if (hot_threshold_ == 0) {
    // frames.cc .checks.once: the bounds every call site's first test
    // compares, as offsets that become constants once every site has said
    // what it needs.
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
  // polled (polls.cc .poll.where).
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
  // The path state (path_state.h .path.flow) flows forward only: JUMP and
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

absl::Status EmitFunction(const VM& vm, const Function& fn, const std::string& symbol,
                          llvm::Module* module, uint32_t hot_threshold,
                          std::vector<InlinedCall>* inlined) {
  // calls.cc .return.self-int: optimised code first assumes that the function's calls of
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
