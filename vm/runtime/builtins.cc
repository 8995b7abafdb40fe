// Built-in functions. Every one that allocates takes its heap inputs from
// the argument slots and re-reads them after allocating (moving GC).
#include "vm/runtime/builtins.h"

#include <atomic>
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "gc/heap.h"
#include "gc/write_barrier.h"
#include "vm/runtime/builtin_classes.h"
#include "vm/runtime/strings.h"
#include "vm/runtime/vm.h"

namespace minivm {
namespace {

using gc::Object;
using gc::Value;

bool RaiseType(VMThread* t, const char* builtin, const char* expected, Value got) {
  t->Raise(ErrorKind::kTypeError,
           absl::StrCat(builtin, " expects ", expected, ", got ", TypeName(got)));
  return false;
}

// array(n) / bytes(n).
bool NewArrayLike(VMThread* t, const char* name, const Klass* klass, Value* args) {
  const Value n = args[0];
  if (!n.IsInt()) return RaiseType(t, name, "an int", n);
  if (n.AsInt() < 0) {
    t->Raise(ErrorKind::kValueError, absl::StrCat(name, " length ", n.AsInt(), " is negative"));
    return false;
  }
  Object* o = t->AllocateArray(klass, static_cast<uint64_t>(n.AsInt()));
  if (o == nullptr) return false;
  args[0] = Value::Ref(o);
  return true;
}

bool Len(VMThread* t, Value* args) {
  const Value x = args[0];
  if (!IsArray(x) && !IsBytes(x) && !IsString(x)) {
    return RaiseType(t, "len", "an Array, Bytes or String", x);
  }
  args[0] = Value::Int(static_cast<int64_t>(x.AsRef()->length()));
  return true;
}

bool Str(VMThread* t, Value* args) {
  const Value v = args[0];
  if (IsString(v)) return true;
  std::string text;
  if (v.IsInt() || v.IsNull()) {
    AppendPrintable(v, &text);
  } else {
    return RaiseType(t, "str", "an int, String or null", v);
  }
  Object* s = NewString(t, text);
  if (s == nullptr) return false;
  args[0] = Value::Ref(s);
  return true;
}

bool Int(VMThread* t, Value* args) {
  const Value v = args[0];
  if (v.IsInt()) return true;
  if (!IsString(v)) return RaiseType(t, "int", "a String or int", v);
  std::string_view s = StringBytes(v.AsRef());
  std::string_view digits = s;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  bool ok = !digits.empty();
  bool overflow = false;
  uint64_t magnitude = 0;  // never above 2^62, so magnitude * 10 cannot wrap
  constexpr uint64_t kMaxMagnitude = uint64_t{1} << 62;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      ok = false;
      break;
    }
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (overflow || magnitude > (kMaxMagnitude - d) / 10) {
      overflow = true;  // keep scanning: a malformed string is reported as such
      continue;
    }
    magnitude = magnitude * 10 + d;
  }
  if (!ok) {
    t->Raise(ErrorKind::kValueError, absl::StrCat("int: malformed integer ", DescribeValue(v)));
    return false;
  }
  const uint64_t limit = negative ? kMaxMagnitude : kMaxMagnitude - 1;
  if (overflow || magnitude > limit) {
    t->Raise(ErrorKind::kValueError,
             absl::StrCat("int: ", DescribeValue(v), " is out of the 63-bit range"));
    return false;
  }
  const int64_t value =
      negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  args[0] = Value::Int(value);
  return true;
}

// args(): a new Array of new Strings. The Array is kept in a temporary root
// slot while the Strings are allocated.
bool Args(VMThread* t, Value* result) {
  const std::vector<std::string>& program_args = t->vm->options().program_args;
  Object* array = t->AllocateArray(ArrayKlass(), program_args.size());
  if (array == nullptr) return false;
  Value* root = t->PushRoot(Value::Ref(array));
  for (size_t i = 0; i < program_args.size(); ++i) {
    Object* s = NewString(t, program_args[i]);
    if (s == nullptr) {
      t->PopRoots(1);
      return false;
    }
    Object* a = root->AsRef();  // may have moved
    a->elements()[i] = Value::Ref(s);
    gc::WriteBarrier(&t->mutator, a, Value::Ref(s));
  }
  *result = *root;
  t->PopRoots(1);
  return true;
}

// False if the line could not be written (stdout has failed).
bool Print(VMThread* t, Value* args, int argc) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) line += ' ';
    AppendPrintable(args[i], &line);
  }
  line += '\n';
  args[0] = Value::Null();
  return t->vm->WriteLine(t, line);
}

bool Rand(VMThread* t, Value* args) {
  const Value n = args[0];
  if (!n.IsInt()) return RaiseType(t, "rand", "an int", n);
  if (n.AsInt() <= 0) {
    t->Raise(ErrorKind::kValueError, absl::StrCat("rand bound ", n.AsInt(), " is not positive"));
    return false;
  }
  args[0] = Value::Int(static_cast<int64_t>(t->rng.Below(static_cast<uint64_t>(n.AsInt()))));
  return true;
}

bool Assert(VMThread* t, Value* args, int argc) {
  if (args[0].IsTruthy()) {
    args[0] = Value::Null();
    return true;
  }
  std::string message;
  if (argc > 1) AppendPrintable(args[1], &message);
  t->Raise(ErrorKind::kAssertionFailed, std::move(message));
  return false;
}

}  // namespace

Outcome CallBuiltin(VMThread* t, Builtin b, Value* args, int argc) {
  bool ok = true;
  switch (b) {
    case Builtin::k_print:
      if (!Print(t, args, argc)) {
        // Lost output ends the VM like exit(1); the exit names the stream
        // and the reason (vm/runtime/standard_streams.h).
        t->exit_code = 1;
        return Outcome::kExit;
      }
      break;
    case Builtin::k_array:
      ok = NewArrayLike(t, "array", ArrayKlass(), args);
      break;
    case Builtin::k_bytes:
      ok = NewArrayLike(t, "bytes", BytesKlass(), args);
      break;
    case Builtin::k_len:
      ok = Len(t, args);
      break;
    case Builtin::k_str:
      ok = Str(t, args);
      break;
    case Builtin::k_int:
      ok = Int(t, args);
      break;
    case Builtin::k_args:
      ok = Args(t, args);
      break;
    case Builtin::k_join:
      ok = t->vm->Join(t, args);
      break;
    case Builtin::k_thread_name: {
      Object* s = NewString(t, t->name);
      ok = s != nullptr;
      if (ok) args[0] = Value::Ref(s);
      break;
    }
    case Builtin::k_gc:
      t->vm->heap()->CollectGarbage(&t->mutator, gc::GcCause::kExplicit);
      args[0] = Value::Null();
      break;
    case Builtin::k_nanotime:
      args[0] = Value::Int(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count());
      break;
    case Builtin::k_rand:
      ok = Rand(t, args);
      break;
    case Builtin::k_assert:
      ok = Assert(t, args, argc);
      break;
    case Builtin::k_exit: {
      const Value code = args[0];
      if (!code.IsInt()) {
        ok = RaiseType(t, "exit", "an int", code);
      } else if (code.AsInt() < 0 || code.AsInt() > 255) {
        t->Raise(ErrorKind::kValueError,
                 absl::StrCat("exit code ", code.AsInt(), " not in 0..255"));
        ok = false;
      } else {
        t->exit_code = static_cast<int>(code.AsInt());
        return Outcome::kExit;
      }
      break;
    }
  }
  return ok ? Outcome::kReturn : Outcome::kError;
}

}  // namespace minivm
