#include "vm/runtime/strings.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "gc/heap.h"
#include "vm/runtime/builtin_classes.h"

namespace minivm {

gc::Object* NewString(VMThread* t, std::string_view contents) {
  gc::Object* s = t->AllocateArray(StringKlass(), contents.size());
  if (s != nullptr && !contents.empty()) {
    std::memcpy(s->bytes(), contents.data(), contents.size());
  }
  return s;
}

gc::Object* ConcatStrings(VMThread* t, const gc::Value* a, const gc::Value* b) {
  const uint64_t na = a->AsRef()->length();
  const uint64_t nb = b->AsRef()->length();
  gc::Object* s = t->AllocateArray(StringKlass(), na + nb);
  if (s == nullptr) return nullptr;
  // Re-read the operands: the allocation may have moved them.
  std::memcpy(s->bytes(), a->AsRef()->bytes(), na);
  std::memcpy(s->bytes() + na, b->AsRef()->bytes(), nb);
  return s;
}

bool StringEquals(const gc::Object* a, const gc::Object* b) {
  return a->length() == b->length() && std::memcmp(a->bytes(), b->bytes(), a->length()) == 0;
}

void AppendPrintable(gc::Value v, std::string* out) {
  if (v.IsInt()) {
    absl::StrAppend(out, v.AsInt());
  } else if (v.IsNull()) {
    out->append("null");
  } else if (v.AsRef()->klass == StringKlass()) {
    out->append(StringBytes(v.AsRef()));
  } else {
    absl::StrAppend(out, "<", KlassOf(v.AsRef())->name, ">");
  }
}

std::string DescribeValue(gc::Value v) {
  if (IsString(v)) {
    constexpr size_t kMax = 32;
    const std::string_view bytes = StringBytes(v.AsRef());
    const absl::string_view s(bytes.data(), bytes.size());
    if (s.size() > kMax) return absl::StrCat("\"", s.substr(0, kMax), "...\"");
    return absl::StrCat("\"", s, "\"");
  }
  std::string out;
  AppendPrintable(v, &out);
  return out;
}

}  // namespace minivm
