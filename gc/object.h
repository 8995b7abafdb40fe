// The heap's object model: tagged values, the object header and the layouts
// the GC needs to size and scan any object.
//
// This header is the whole of what gc/ knows about objects. The VM's classes
// (Klass, in vm/bytecode/program.h) extend ClassLayout with names and fields;
// the GC only ever reads the layout part, so gc/ never includes vm/.
//
// Values (64 bits):
//
//   +-----------------------------------------------------------+---+
//   | 63-bit two's complement integer                           | 1 |   int
//   +-----------------------------------------------------------+---+
//   | address of an Object (8-byte aligned)                 | 000   |   ref
//   +-------------------------------------------------------+-------+
//   | 0                                                             |   null
//   +---------------------------------------------------------------+
//
// Every 64-bit slot the GC scans is a Value, so every slot can be
// classified exactly (no conservative scanning). Integers carry tag 1 so that
// references are plain pointers and null is all-zero memory: a freshly zeroed
// object is an object whose fields are all null.
//
// Object header (16 bytes), then the body:
//
//   offset  0: const ClassLayout*  klass    immutable after allocation
//   offset  8: uint64_t            gc_word  owned by the GC:
//        bit  0      forwarded: the rest of the word is the new address
//        bit  1      marked (old-generation mark-sweep)
//        bits 2..5   age: minor collections survived (saturates at 15)
//        bits 6..63  zero unless forwarded
//   offset 16: body
//     kFields:    field_count Values                  size 16 + 8k
//     kRefArray:  uint64 length, then length Values   size 24 + 8n
//     kByteArray: uint64 length, then length bytes    size 24 + n, rounded to 8
#ifndef MINIVM_GC_OBJECT_H_
#define MINIVM_GC_OBJECT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace minivm::gc {

inline constexpr size_t kObjectAlignment = 8;
inline constexpr size_t kHeaderSize = 16;
inline constexpr size_t kArrayHeaderSize = 24;  // header + length word

// The largest value of a 63-bit integer, and the smallest.
inline constexpr int64_t kMaxInt = (int64_t{1} << 62) - 1;
inline constexpr int64_t kMinInt = -(int64_t{1} << 62);

struct Object;

// A tagged value. Trivially copyable, 8 bytes, all-zero is null.
class Value {
 public:
  constexpr Value() : bits_(0) {}

  static constexpr Value Null() { return Value(); }
  // Wraps to 63 bits: the language's integer arithmetic wraps (docs/language.md).
  static constexpr Value Int(int64_t i) {
    return Value((static_cast<uint64_t>(i) << 1) | 1);
  }
  static Value Ref(const Object* o) {
    return Value(reinterpret_cast<uint64_t>(o));
  }
  static constexpr Value FromBits(uint64_t bits) { return Value(bits); }

  constexpr bool IsInt() const { return (bits_ & 1) != 0; }
  constexpr bool IsNull() const { return bits_ == 0; }
  // A reference to an object (not null, not an integer).
  constexpr bool IsRef() const { return bits_ != 0 && (bits_ & 1) == 0; }

  constexpr int64_t AsInt() const { return static_cast<int64_t>(bits_) >> 1; }
  Object* AsRef() const { return reinterpret_cast<Object*>(bits_); }
  constexpr uint64_t bits() const { return bits_; }

  // null and 0 are false; everything else is true.
  constexpr bool IsTruthy() const { return bits_ != 0 && bits_ != 1; }

  friend constexpr bool operator==(Value a, Value b) { return a.bits_ == b.bits_; }
  friend constexpr bool operator!=(Value a, Value b) { return a.bits_ != b.bits_; }

 private:
  constexpr explicit Value(uint64_t bits) : bits_(bits) {}
  uint64_t bits_;
};
static_assert(sizeof(Value) == 8);

enum class LayoutKind : uint8_t {
  kFields,     // field_count Values
  kRefArray,   // length word, then Values
  kByteArray,  // length word, then raw bytes (never scanned)
};

// What the GC knows about a class. The VM's Klass derives from this;
// instances are never moved or freed while the heap lives.
struct ClassLayout {
  LayoutKind kind = LayoutKind::kFields;
  uint32_t field_count = 0;  // kFields only
};

inline constexpr size_t AlignObjectSize(size_t n) {
  return (n + kObjectAlignment - 1) & ~(kObjectAlignment - 1);
}

// Sizes as the language contract states them; also the bytes the heap uses.
inline constexpr size_t FieldsObjectSize(size_t field_count) {
  return kHeaderSize + 8 * field_count;
}
inline constexpr size_t RefArraySize(uint64_t length) {
  return kArrayHeaderSize + 8 * length;
}
inline constexpr size_t ByteArraySize(uint64_t length) {
  return AlignObjectSize(kArrayHeaderSize + length);
}

namespace gc_word {
inline constexpr uint64_t kForwarded = 1;
inline constexpr uint64_t kMarked = 2;
inline constexpr int kAgeShift = 2;
inline constexpr uint64_t kAgeMask = uint64_t{0xF} << kAgeShift;
inline constexpr uint32_t kMaxAge = 15;
}  // namespace gc_word

struct Object {
  const ClassLayout* klass;
  uint64_t gc_word;

  // Body accessors. Callers know the layout; DCHECK-level misuse is caught by
  // the heap verifier, not here, to keep these free on the fast path.
  uint64_t length() const { return *reinterpret_cast<const uint64_t*>(body()); }
  void set_length(uint64_t n) { *reinterpret_cast<uint64_t*>(body()) = n; }

  Value* fields() { return reinterpret_cast<Value*>(body()); }
  const Value* fields() const { return reinterpret_cast<const Value*>(body()); }
  Value* elements() { return reinterpret_cast<Value*>(body() + 8); }
  const Value* elements() const { return reinterpret_cast<const Value*>(body() + 8); }
  uint8_t* bytes() { return body() + 8; }
  const uint8_t* bytes() const { return body() + 8; }

  size_t Size() const {
    switch (klass->kind) {
      case LayoutKind::kFields:
        return FieldsObjectSize(klass->field_count);
      case LayoutKind::kRefArray:
        return RefArraySize(length());
      case LayoutKind::kByteArray:
        return ByteArraySize(length());
    }
    return 0;
  }

  // The Value slots the GC must visit: [begin, end).
  Value* SlotsBegin() {
    return klass->kind == LayoutKind::kRefArray ? elements() : fields();
  }
  Value* SlotsEnd() {
    switch (klass->kind) {
      case LayoutKind::kFields:
        return fields() + klass->field_count;
      case LayoutKind::kRefArray:
        return elements() + length();
      case LayoutKind::kByteArray:
        return fields();  // empty range: bytes hold no references
    }
    return fields();
  }

  bool IsForwarded() const { return (gc_word & gc_word::kForwarded) != 0; }
  Object* Forwardee() const {
    return reinterpret_cast<Object*>(gc_word & ~uint64_t{7});
  }
  uint32_t Age() const {
    return static_cast<uint32_t>((gc_word & gc_word::kAgeMask) >> gc_word::kAgeShift);
  }

 private:
  uint8_t* body() { return reinterpret_cast<uint8_t*>(this) + kHeaderSize; }
  const uint8_t* body() const {
    return reinterpret_cast<const uint8_t*>(this) + kHeaderSize;
  }
};
static_assert(sizeof(Object) == kHeaderSize);

}  // namespace minivm::gc

#endif  // MINIVM_GC_OBJECT_H_
