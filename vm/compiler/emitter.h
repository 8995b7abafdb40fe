// Appends instructions to one Function: encodes operands (opcodes.h), keeps
// the line table, tracks the operand-stack depth to compute max_stack, and
// patches jumps.
#ifndef MINIVM_VM_COMPILER_EMITTER_H_
#define MINIVM_VM_COMPILER_EMITTER_H_

#include <cstddef>
#include <cstdint>

#include "vm/bytecode/opcodes.h"
#include "vm/bytecode/program.h"

namespace minivm::compiler {

class Emitter {
 public:
  explicit Emitter(Function* fn) : fn_(fn) {}

  // The source line recorded for the instructions emitted next.
  void set_line(int line) { line_ = line; }
  int line() const { return line_; }

  // An instruction and its operands; the name gives the operand widths.
  void Emit(Opcode op) { EmitOperands(op); }
  void EmitU16(Opcode op, uint16_t a) { EmitOperands(op, a); }
  void EmitU32(Opcode op, uint32_t a) { EmitOperands(op, a); }
  void EmitU32U32(Opcode op, uint32_t a, uint32_t b) { EmitOperands(op, a, b); }
  void EmitU32U8(Opcode op, uint32_t a, uint8_t b) { EmitOperands(op, a, b); }
  void EmitU8U8(Opcode op, uint8_t a, uint8_t b) { EmitOperands(op, a, b); }
  void EmitPushInt(int64_t value);

  // A forward jump (JUMP or JUMP_IF_FALSE) whose target is set later by
  // PatchJump; returns a handle for it.
  size_t EmitJump(Opcode op);
  // Points the jump at the current offset.
  void PatchJump(size_t handle);
  // A backward jump (LOOP) to `target`, an offset already emitted.
  void EmitLoop(size_t target);

  size_t offset() const { return fn_->code.size(); }

  // Operand-stack depth. Code after an unconditional jump starts at the depth
  // its jump targets expect, which the caller knows: set_depth restores it.
  int depth() const { return depth_; }
  void set_depth(int depth) { depth_ = depth; }
  int max_depth() const { return max_depth_; }

  // Whether some jump lands at the current end of the code: then the code
  // cannot end here without an instruction for it to land on.
  bool JumpTargetsEnd() const { return last_target_ == fn_->code.size(); }

 private:
  size_t Begin(Opcode op);  // records the line, writes the opcode
  void End(size_t start);   // applies the stack effect
  void Put(const void* bytes, size_t n);
  // Writes `op` and its operands, each in the width of its type (the typed
  // public wrappers fix the widths), and applies the stack effect.
  template <typename... Operands>
  size_t EmitOperands(Opcode op, Operands... operands) {
    const size_t start = Begin(op);
    (Put(&operands, sizeof operands), ...);
    End(start);
    return start;
  }

  Function* fn_;
  int line_ = 0;
  int depth_ = 0;
  int max_depth_ = 0;
  size_t last_target_ = static_cast<size_t>(-1);
};

}  // namespace minivm::compiler

#endif  // MINIVM_VM_COMPILER_EMITTER_H_
