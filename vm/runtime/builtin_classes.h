// The classes the language provides: Array, Bytes, String and Thread.
//
// They are ordinary Klasses (so `obj->klass` identifies them with one pointer
// compare) but belong to no Program: they are process-wide immutables with
// `index == -1` and no field symbols, so `o.f` on any of them is an unknown
// field. Bytes and String share a layout (kByteArray) and differ only in the
// Klass pointer; String contents never change after the String is built.
//
// Thread instances have one field, [0] = the thread's index in the VM's thread
// table (an int). A finished thread's result is kept in the table, which is a
// root (see vm.h), not in the Thread object: `join` works the same whether
// or not the program still holds the Thread.
#ifndef MINIVM_VM_RUNTIME_BUILTIN_CLASSES_H_
#define MINIVM_VM_RUNTIME_BUILTIN_CLASSES_H_

#include "gc/object.h"
#include "vm/bytecode/program.h"

namespace minivm {

inline constexpr uint32_t kThreadIndexField = 0;
inline constexpr uint32_t kThreadFieldCount = 1;

const Klass* ArrayKlass();
const Klass* BytesKlass();
const Klass* StringKlass();
const Klass* ThreadKlass();

namespace internal {
// The definitions behind the accessors above, exposed so that the interpreter
// can compare against a link-time constant address.
extern const Klass kArrayKlass;
extern const Klass kBytesKlass;
extern const Klass kStringKlass;
extern const Klass kThreadKlass;
}  // namespace internal

inline const Klass* ArrayKlass() { return &internal::kArrayKlass; }
inline const Klass* BytesKlass() { return &internal::kBytesKlass; }
inline const Klass* StringKlass() { return &internal::kStringKlass; }
inline const Klass* ThreadKlass() { return &internal::kThreadKlass; }

inline const Klass* KlassOf(const gc::Object* o) { return static_cast<const Klass*>(o->klass); }
inline bool IsString(gc::Value v) { return v.IsRef() && v.AsRef()->klass == StringKlass(); }
inline bool IsArray(gc::Value v) { return v.IsRef() && v.AsRef()->klass == ArrayKlass(); }
inline bool IsBytes(gc::Value v) { return v.IsRef() && v.AsRef()->klass == BytesKlass(); }
inline bool IsThread(gc::Value v) { return v.IsRef() && v.AsRef()->klass == ThreadKlass(); }

// "int", "null", or the class name ("String", "Array", "Node", ...): how
// error messages name a value's type.
const std::string& TypeName(gc::Value v);

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_BUILTIN_CLASSES_H_
