// Allocation: NEW, INIT_FIELDS and the array built-ins' inline TLAB path.
//
// Design:
// .alloc.tlab  NEW inlines the TLAB fast path: load top, add the constant
//    size, compare with current_end, store top, store the class pointer,
//    zero the rest (EmitTlabBump). The slow path is a call of the runtime
//    (minivm_jit_new -> gc::AllocateSlowPath), the same one the interpreter
//    uses; sampling lives entirely there, by lowering current_end, so
//    nothing in the generated code depends on whether sampling is on
//    (tests/jit/check_ir_invariance.py). Rejected: a sampling test in the
//    compiled fast path (a load and branch on every allocation, and IR that
//    depends on an agent).
// .alloc.zeroing  A TLAB is not zeroed in advance (gc/tlab.h), so the fast
//    path zeroes the gc_word and the body: a few plain stores for a
//    constant size, a memset for an array's. The fields NEW's INIT_FIELDS
//    fills with no GC point between (FilledBeforeAnyGcPoint: the arguments
//    are constants and variables) are left out: no collection, stack walk
//    or other thread can see the object before those stores, and it is
//    published only by a later release store. Rejected: zeroing them too
//    (two stores per two-field object that dead-store elimination cannot
//    remove: the arguments' stores, after the merge with the slow path, go
//    through a pointer it cannot match).
// .alloc.init  INIT_FIELDS stores plainly (the object is not yet reachable
//    from other threads) with the write barrier (objects.cc .barrier): a
//    collection while the arguments were evaluated may have promoted the
//    object. NEW's own initialising stores, which follow the allocation
//    directly, skip the barrier on the fast path (a TLAB object is young,
//    and young objects' cards are never scanned) but not on the slow path
//    (the object may be old).
// .alloc.arrays  array(n) and bytes(n) of an int n that fits a TLAB take
//    the same fast path with the size computed from n and a store of the
//    length word, as gc::Allocate does for the interpreter; their slow path
//    is the built-in itself, which raises the errors (EmitNewArrayFastPath).
#include "vm/jit/allocation.h"

#include "vm/jit/ir_generator_internal.h"
#include "vm/runtime/builtin_classes.h"

namespace minivm::jit {

using enum RuntimeFunction;

uint64_t FilledBeforeAnyGcPoint(const Function& fn, const VerifiedCode& verified, uint32_t off) {
  const uint8_t* code = fn.code.data();
  // NEW allocates before its arguments are evaluated (bytecode_generator.cc,
  // CompileNew), so its fields are usually stored only after calls that can
  // collect: those must find them zeroed. When the arguments are constants
  // and variables, nothing between NEW and INIT_FIELDS is a GC point, a
  // block entry or a side exit, and the fields they fill need no zeroing.
  const uint8_t* pc = code + off;
  uint32_t at = off + OpcodeLength(Opcode::NEW);
  int pushed = 0;
  while (at < fn.code.size() && !verified.is_leader[at]) {
    switch (static_cast<Opcode>(code[at])) {
      case Opcode::PUSH_INT:
      case Opcode::PUSH_NULL:
      case Opcode::PUSH_STRING:
      case Opcode::LOAD_LOCAL:
      case Opcode::LOAD_GLOBAL:
        ++pushed;
        break;
      case Opcode::INIT_FIELDS:
        // The same class, and exactly the values pushed since NEW.
        return ReadU32(code + at + 1) == ReadU32(pc + 1) && code[at + 5] == pushed ? pushed : 0;
      default:
        return 0;
    }
    at += OpcodeLength(static_cast<Opcode>(code[at]));
  }
  return 0;
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
  // left out (.alloc.zeroing).
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
    // .alloc.tlab: no sampling logic, by construction.
    fast = NewBlock("new_fast");
    top = EmitTlabBump(Const64(size), klass, slow, fast,
                       8 * FilledBeforeAnyGcPoint(fn_, verified_, off));
    b_.CreateBr(done);
  } else {
    b_.CreateBr(slow);
  }
  b_.SetInsertPoint(slow);
  Spill(n, off);
  LValue* obj_slow = b_.CreateCall(Rt(kNew), {thread_, ConstPtr(klass), Const64(size)});
  ReturnErrorIf(b_.CreateICmpEQ(obj_slow, llvm::ConstantPointerNull::get(ptr_)), "new_allocated");
  BasicBlock* allocated = b_.GetInsertBlock();
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

void IrGenerator::EmitInitFields(uint32_t off, int depth) {
  // .alloc.init: plain stores, with the barrier.
  const int argc = code_[off + 5];
  LValue* obj = Operand(depth, -argc - 1);
  for (int i = 0; i < argc; ++i) {
    LValue* v = Operand(depth, -argc + i);
    StoreField(v, AsPtr(obj), gc::kHeaderSize + 8 * static_cast<uint64_t>(i), tbaa_object_);
    EmitCardMark(obj, v, nullptr);
  }
}

BasicBlock* IrGenerator::EmitNewArrayFastPath(int depth, bool refs) {
  // .alloc.arrays: array(n) / bytes(n) of an int n whose object fits a
  // TLAB: NEW's TLAB fast path plus the length word, as gc::Allocate does for the
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

}  // namespace minivm::jit
