#include "vm/compiler/emitter.h"

#include <algorithm>
#include <cstring>

#include "gc/object.h"

namespace minivm::compiler {

size_t Emitter::Begin(Opcode op) {
  const size_t start = fn_->code.size();
  fn_->lines.Add(static_cast<uint32_t>(start), line_);
  fn_->code.push_back(static_cast<uint8_t>(op));
  return start;
}

void Emitter::End(size_t start) {
  depth_ += StackEffect(fn_->code.data() + start);
  max_depth_ = std::max(max_depth_, depth_);
}

void Emitter::Put(const void* bytes, size_t n) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  fn_->code.insert(fn_->code.end(), p, p + n);
}

void Emitter::EmitPushInt(int64_t value) {
  EmitOperands(Opcode::PUSH_INT, gc::Value::Int(value).bits());
}

size_t Emitter::EmitJump(Opcode op) {
  return EmitOperands(op, int32_t{0}) + 1;  // the offset, patched later
}

void Emitter::PatchJump(size_t handle) {
  const size_t target = fn_->code.size();
  const auto offset =
      static_cast<int32_t>(static_cast<int64_t>(target) - static_cast<int64_t>(handle + 4));
  std::memcpy(fn_->code.data() + handle, &offset, sizeof offset);
  last_target_ = target;
}

void Emitter::EmitLoop(size_t target) {
  const size_t next = offset() + OpcodeLength(Opcode::LOOP);
  EmitOperands(Opcode::LOOP,
               static_cast<int32_t>(static_cast<int64_t>(target) - static_cast<int64_t>(next)));
}

}  // namespace minivm::compiler
