#include "vm/runtime/builtin_classes.h"

namespace minivm {
namespace internal {
namespace {

Klass MakeKlass(const char* name, gc::LayoutKind kind, uint32_t field_count) {
  Klass k;
  k.kind = kind;
  k.field_count = field_count;
  k.name = name;
  k.index = -1;
  return k;
}

}  // namespace

const Klass kArrayKlass = MakeKlass("Array", gc::LayoutKind::kRefArray, 0);
const Klass kBytesKlass = MakeKlass("Bytes", gc::LayoutKind::kByteArray, 0);
const Klass kStringKlass = MakeKlass("String", gc::LayoutKind::kByteArray, 0);
const Klass kThreadKlass = MakeKlass("Thread", gc::LayoutKind::kFields, kThreadFieldCount);

}  // namespace internal

const std::string& TypeName(gc::Value v) {
  static const std::string* const kInt = new std::string("int");
  static const std::string* const kNull = new std::string("null");
  if (v.IsInt()) return *kInt;
  if (v.IsNull()) return *kNull;
  return KlassOf(v.AsRef())->name;
}

}  // namespace minivm
