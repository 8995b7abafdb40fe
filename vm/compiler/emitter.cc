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

void Emitter::Emit(Opcode op) { End(Begin(op)); }

void Emitter::EmitU16(Opcode op, uint16_t a) {
  const size_t start = Begin(op);
  Put(&a, sizeof a);
  End(start);
}

void Emitter::EmitU32(Opcode op, uint32_t a) {
  const size_t start = Begin(op);
  Put(&a, sizeof a);
  End(start);
}

void Emitter::EmitU32U32(Opcode op, uint32_t a, uint32_t b) {
  const size_t start = Begin(op);
  Put(&a, sizeof a);
  Put(&b, sizeof b);
  End(start);
}

void Emitter::EmitU32U8(Opcode op, uint32_t a, uint8_t b) {
  const size_t start = Begin(op);
  Put(&a, sizeof a);
  Put(&b, sizeof b);
  End(start);
}

void Emitter::EmitU8U8(Opcode op, uint8_t a, uint8_t b) {
  const size_t start = Begin(op);
  Put(&a, sizeof a);
  Put(&b, sizeof b);
  End(start);
}

void Emitter::EmitPushInt(int64_t value) {
  const size_t start = Begin(Opcode::PUSH_INT);
  const uint64_t bits = gc::Value::Int(value).bits();
  Put(&bits, sizeof bits);
  End(start);
}

size_t Emitter::EmitJump(Opcode op) {
  const size_t start = Begin(op);
  const int32_t placeholder = 0;
  Put(&placeholder, sizeof placeholder);
  End(start);
  return start + 1;
}

void Emitter::PatchJump(size_t handle) {
  const size_t target = fn_->code.size();
  const auto offset =
      static_cast<int32_t>(static_cast<int64_t>(target) - static_cast<int64_t>(handle + 4));
  std::memcpy(fn_->code.data() + handle, &offset, sizeof offset);
  last_target_ = target;
}

void Emitter::EmitLoop(size_t target) {
  const size_t start = Begin(Opcode::LOOP);
  const auto offset =
      static_cast<int32_t>(static_cast<int64_t>(target) - static_cast<int64_t>(start + 5));
  Put(&offset, sizeof offset);
  End(start);
}

}  // namespace minivm::compiler
