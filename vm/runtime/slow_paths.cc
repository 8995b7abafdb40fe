#include "vm/runtime/slow_paths.h"

#include <cassert>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gc/write_barrier.h"
#include "vm/runtime/builtin_classes.h"
#include "vm/runtime/errors.h"
#include "vm/runtime/shared_slots.h"
#include "vm/runtime/strings.h"
#include "vm/runtime/vm.h"

namespace minivm {

using gc::Object;
using gc::Value;

namespace {

// The source spelling of the operators BinarySlow reports on.
constexpr std::pair<Opcode, const char*> kOperatorSymbols[] = {
    {Opcode::ADD, "+"}, {Opcode::SUB, "-"}, {Opcode::MUL, "*"},  {Opcode::DIV, "/"},
    {Opcode::MOD, "%"}, {Opcode::LT, "<"},  {Opcode::LE, "<="}, {Opcode::GT, ">"},
    {Opcode::GE, ">="}, {Opcode::BIT_AND, "&"}, {Opcode::BIT_OR, "|"}, {Opcode::BIT_XOR, "^"},
    {Opcode::SHL, "<<"}, {Opcode::SHR, ">>"}, {Opcode::NEG, "-"}, {Opcode::BIT_NOT, "~"}};

const char* OpSymbol(Opcode op) {
  for (const auto& [opcode, symbol] : kOperatorSymbols) {
    if (opcode == op) return symbol;
  }
  return "?";
}

}  // namespace

// Binary arithmetic and comparisons when the fast path did not apply.
// operands[0], operands[1] are the stack slots; the result goes to
// operands[0].
bool BinarySlow(VMThread* t, Opcode op, Value* operands) {
  const Value a = operands[0];
  const Value b = operands[1];
  if (a.IsInt() && b.IsInt()) {
    // Only DIV and MOD come here with two ints (BinarySlowCanSucceed).
    assert(op == Opcode::DIV || op == Opcode::MOD);
    const int64_t x = a.AsInt();
    const int64_t y = b.AsInt();
    if (y == 0) {
      t->Raise(ErrorKind::kDivisionByZero, absl::StrCat(x, " ", OpSymbol(op), " 0"));
      return false;
    }
    // |x|, |y| < 2^62, so neither quotient nor remainder overflows int64;
    // kMinInt / -1 = 2^62 wraps to kMinInt in Value::Int, as documented.
    operands[0] = Value::Int(op == Opcode::DIV ? x / y : x % y);
    return true;
  }
  if (op == Opcode::ADD && IsString(a) && IsString(b)) {
    Object* s = ConcatStrings(t, &operands[0], &operands[1]);
    if (s == nullptr) return false;
    operands[0] = Value::Ref(s);
    return true;
  }
  if (op == Opcode::ADD) {
    t->Raise(ErrorKind::kTypeError, absl::StrCat("+ expects two ints or two Strings, got ",
                                                 TypeName(a), " and ", TypeName(b)));
  } else {
    t->Raise(ErrorKind::kTypeError, absl::StrCat(OpSymbol(op), " expects two ints, got ",
                                                 TypeName(a), " and ", TypeName(b)));
  }
  return false;
}

bool ValuesEqualSlow(Value a, Value b) {
  // Identical bits were handled inline.
  return IsString(a) && IsString(b) && StringEquals(a.AsRef(), b.AsRef());
}

void RaiseUnaryType(VMThread* t, Opcode op, Value a) {
  t->Raise(ErrorKind::kTypeError,
           absl::StrCat("unary ", OpSymbol(op), " expects an int, got ", TypeName(a)));
}

// Resolves a field for `obj` (an arbitrary value) through the Klass, updates
// the cache; returns the slot or -1 with the error raised.
int ResolveField(VMThread* t, Value obj, uint32_t symbol, FieldCache* cache,
                                   bool write) {
  const Program& program = t->vm->program();
  if (obj.IsNull()) {
    t->Raise(ErrorKind::kNullDereference,
             absl::StrCat(write ? "cannot write field '" : "cannot read field '",
                          program.symbols.Name(symbol), "' of null"));
    return -1;
  }
  if (obj.IsRef()) {
    const Klass* k = KlassOf(obj.AsRef());
    const int slot = k->kind == gc::LayoutKind::kFields ? k->FieldIndex(symbol) : -1;
    if (slot >= 0) {
      if (slot <= 0xFFFF) cache->Update(k, slot);
      return slot;
    }
  }
  t->Raise(ErrorKind::kUnknownField,
           absl::StrCat(TypeName(obj), " has no field '", program.symbols.Name(symbol), "'"));
  return -1;
}

// Checks an index operation's receiver and index; returns the element index
// or -1 with the error raised.
static int64_t CheckIndex(VMThread* t, Value obj, Value index, bool write) {
  if (obj.IsNull()) {
    t->Raise(ErrorKind::kNullDereference,
             write ? "cannot assign an element of null" : "cannot index null");
    return -1;
  }
  if (!IsArray(obj) && !IsBytes(obj) && !IsString(obj)) {
    t->Raise(ErrorKind::kTypeError, absl::StrCat("cannot index ", TypeName(obj)));
    return -1;
  }
  if (write && IsString(obj)) {
    t->Raise(ErrorKind::kTypeError, "cannot assign an element of a String (Strings are immutable)");
    return -1;
  }
  const uint64_t length = obj.AsRef()->length();
  if (!index.IsInt() || index.AsInt() < 0 || static_cast<uint64_t>(index.AsInt()) >= length) {
    t->Raise(ErrorKind::kIndexOutOfRange,
             absl::StrCat("index ", DescribeValue(index), " out of range for ", TypeName(obj),
                          " of length ", length));
    return -1;
  }
  return index.AsInt();
}

// [obj, i] -> [obj[i]] in operands[0].
bool GetIndexSlow(VMThread* t, Value* operands) {
  const Value obj = operands[0];
  const int64_t i = CheckIndex(t, obj, operands[1], /*write=*/false);
  if (i < 0) return false;
  if (IsArray(obj)) {
    operands[0] = LoadShared(&obj.AsRef()->elements()[i]);
  } else {
    operands[0] = Value::Int(LoadSharedByte(&obj.AsRef()->bytes()[i]));
  }
  return true;
}

// [obj, i, v]: obj[i] = v.
bool SetIndexSlow(VMThread* t, Value* operands) {
  const Value obj = operands[0];
  const Value v = operands[2];
  const int64_t i = CheckIndex(t, obj, operands[1], /*write=*/true);
  if (i < 0) return false;
  if (IsArray(obj)) {
    StoreShared(&obj.AsRef()->elements()[i], v);
    gc::WriteBarrier(&t->mutator, obj.AsRef(), v);
    return true;
  }
  if (!v.IsInt() || v.AsInt() < 0 || v.AsInt() > 255) {
    t->Raise(ErrorKind::kValueError,
             absl::StrCat("byte value ", DescribeValue(v), " not in 0..255"));
    return false;
  }
  StoreSharedByte(&obj.AsRef()->bytes()[i], static_cast<uint8_t>(v.AsInt()));
  return true;
}

void RaiseStackOverflow(VMThread* t, bool frames) {
  if (frames) {
    t->Raise(ErrorKind::kStackOverflow,
             absl::StrCat("more than ", t->vm->options().stack_depth, " calls deep"));
  } else {
    t->Raise(ErrorKind::kStackOverflow,
             absl::StrCat("the value stack is full (", t->stack_slots(), " slots)"));
  }
}

void RaiseHeapExhausted(VMThread* t, size_t size) {
  t->Raise(ErrorKind::kHeapExhausted, absl::StrCat("cannot allocate ", size, " bytes"));
}

}  // namespace minivm
