// Strings: immutable byte arrays with the String Klass (builtin_classes.h).
//
// Moving-GC rule for everything here: a std::string_view of a heap String is
// valid only until the next allocation, and functions that allocate take
// their heap inputs as stack slots, which they re-read after allocating.
#ifndef MINIVM_VM_RUNTIME_STRINGS_H_
#define MINIVM_VM_RUNTIME_STRINGS_H_

#include <string>
#include <string_view>

#include "gc/object.h"
#include "vm/runtime/thread.h"

namespace minivm {

inline std::string_view StringBytes(const gc::Object* s) {
  return std::string_view(reinterpret_cast<const char*>(s->bytes()), s->length());
}

// A new String holding `contents`, which must not point into the heap. On
// failure raises `heap exhausted` on `t` and returns nullptr.
gc::Object* NewString(VMThread* t, std::string_view contents);

// The concatenation of the Strings in *a and *b (stack slots), or nullptr
// with `heap exhausted` raised.
gc::Object* ConcatStrings(VMThread* t, const gc::Value* a, const gc::Value* b);

bool StringEquals(const gc::Object* a, const gc::Object* b);

// Appends v as `print` writes it: ints in decimal, Strings as their text,
// null as "null", other objects as "<ClassName>".
void AppendPrintable(gc::Value v, std::string* out);

// A short description of a value for error messages: ints in decimal, null,
// Strings quoted (truncated), other objects as "<ClassName>".
std::string DescribeValue(gc::Value v);

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_STRINGS_H_
