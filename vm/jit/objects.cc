// Objects: field and element access, the write barrier, and the built-ins
// and SPAWN, which call the runtime.
//
// Design:
// .memory-model  As the interpreter's (vm/runtime/shared_slots.h): acquire
//    loads and release stores for globals, fields and elements; relaxed
//    byte loads and stores for Bytes; plain loads of words that never
//    change once an object is published (class pointers, length words).
// .barrier  The write barrier is inline: a relaxed byte store into the card
//    table at (holder >> kCardShift), when the stored value is a reference
//    (EmitCardMark). A Bytes element is never a reference and has none.
// .field.cache  A field access tests for an object (skipped where the path
//    knows one, path_state.h .path.ref), then its site's inline cache as it
//    is at compile time: a warm site gets its class and slot as constants,
//    checked first; the site's shared cache word (class and slot in one
//    atomic word) is the fallback, and a miss calls ResolveField, which
//    fills the cache, raises for null, an int or an object without the
//    field, and never allocates or stops, so no slot is reloaded after it.
// .index.inline  GET_INDEX and SET_INDEX of an Array or Bytes with an int
//    index in range are inline; anything else (another class, a bad index
//    or Bytes value) calls the runtime, which raises or handles it.
// .builtin  A built-in is a GC point and a call of the runtime with its
//    arguments home, but len (the length word of an Array, Bytes or String,
//    immutable once published) and array(n) and bytes(n) (allocation.cc
//    .alloc.arrays), whose common cases are inline with the call as their
//    slow path.
#include <atomic>
#include <vector>

#include "vm/bytecode/builtins.h"
#include "vm/jit/ir_generator_internal.h"
#include "vm/runtime/builtin_classes.h"

namespace minivm::jit {

using enum RuntimeFunction;

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
  if (path_.is_ref[obj_slot]) {  // path_state.h .path.ref
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
  // ResolveField never allocates or stops, so obj and every slot are still
  // valid after it: no reload.
  ReturnErrorIf(b_.CreateICmpSLT(resolved, Const64(0)), "field_resolved");
  BasicBlock* resolved_block = b_.GetInsertBlock();
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
    ReturnErrorIf(b_.CreateICmpEQ(ok, b_.getInt32(0)), "spawned");
  }
  path_.Forget(n - argc, fn_.num_locals);  // the result, written home
  Reload(n - argc + 1);
  if (done != nullptr) {
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }
}

}  // namespace minivm::jit
