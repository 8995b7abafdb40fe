// Operators: arithmetic, comparisons, bitwise operators, equality and the
// unary operators, each an inline fast path on tagged ints with the
// runtime behind it.
//
// Design:
// .op.tagged  Ints are tagged (bit 0 set, the value in the upper 63 bits,
//    gc/object.h), and the fast paths work on the tagged bits where
//    they can: ADD is a + b - 1 and SUB a - b + 1 (wrapping at 63 bits
//    exactly as the language says), comparisons compare the tagged words
//    (the tag bit does not change the order), the bitwise operators work on
//    the tagged bits as the interpreter does; MUL, DIV, MOD and the shifts
//    untag, operate and retag (shift counts masked to 6 bits, so LLVM's
//    shift is never poison). DIV and MOD take the fast path only for
//    positive divisors, as the interpreter does (0 is an error and -1 may
//    overflow; the runtime handles both).
// .op.raise-only  Slow paths that only raise end the activation. An
//    operator other than ADD, DIV and MOD reaches its slow path only with a
//    non-int operand, which raises (BinarySlowCanSucceed in
//    vm/runtime/slow_paths.h), so its slow path writes the frame back,
//    calls the runtime and returns the error: no reload of every slot and
//    no merge with the fast path. The same holds for NEG and BIT_NOT.
//    Rejected: one slow path shape for every operator (a block of loads and
//    a phi per live slot to compile for each operator, on a path that
//    never continues).
// .op.proven  An operator on two slots the path has proven to be ints
//    (path_state.h .path.int) is its fast path alone, without a test; after
//    any operator but ADD, both operands and the result are ints.
// .op.equality  EQ and NE compare the words; two different references are
//    equal only if they are Strings of equal contents (minivm_jit_equal,
//    declared pure, so LLVM may merge and move it).
#include <vector>

#include "vm/jit/ir_generator_internal.h"
#include "vm/runtime/slow_paths.h"

namespace minivm::jit {

using enum RuntimeFunction;

void IrGenerator::EmitSlowOperandCall(llvm::FunctionCallee callee, uint32_t off, int depth,
                                      int pops, std::vector<LValue*> leading_args, int results) {
  const int n = fn_.num_locals + depth;
  Spill(n, off);
  leading_args.push_back(HomeAddr(n - pops));
  LValue* ok = b_.CreateCall(callee, leading_args);
  ReturnErrorIf(b_.CreateICmpEQ(ok, b_.getInt32(0)), "slow_done");
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
    // path_state.h .path.int: two ints, so the fast path is the only path.
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
    // .op.raise-only: a non-int operand, which the runtime raises on; nothing
    // comes back to reload or to merge with the fast path.
    const int n = fn_.num_locals + depth;
    Spill(n, off);
    b_.CreateCall(Rt(kBinary), {thread_, b_.getInt32(static_cast<int>(op)), HomeAddr(n - 2)});
    ReturnError();
  }
  b_.SetInsertPoint(done);
  // path_state.h .path.int: only ADD goes on with operands that are not ints (Strings),
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

void IrGenerator::EmitUnary(Opcode op, uint32_t off, int depth) {
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
}

}  // namespace minivm::jit
