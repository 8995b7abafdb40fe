// Built-in functions, defined once: the compiler resolves calls by name and
// checks arity; the interpreter dispatches CALL_BUILTIN on the id.
//
// X(name, min_args, max_args); max_args -1 = any number (up to 255).
#ifndef MINIVM_VM_BYTECODE_BUILTINS_H_
#define MINIVM_VM_BYTECODE_BUILTINS_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace minivm {

#define MINIVM_BUILTINS(X) \
  X(print, 0, -1)          \
  X(array, 1, 1)           \
  X(bytes, 1, 1)           \
  X(len, 1, 1)             \
  X(str, 1, 1)             \
  X(int, 1, 1)             \
  X(args, 0, 0)            \
  X(join, 1, 1)            \
  X(thread_name, 0, 0)     \
  X(gc, 0, 0)              \
  X(nanotime, 0, 0)        \
  X(rand, 1, 1)            \
  X(assert, 1, 2)          \
  X(exit, 1, 1)

enum class Builtin : uint8_t {
#define MINIVM_BUILTIN_ENUM(name, min, max) k_##name,
  MINIVM_BUILTINS(MINIVM_BUILTIN_ENUM)
#undef MINIVM_BUILTIN_ENUM
};

struct BuiltinInfo {
  std::string_view name;
  int min_args;
  int max_args;  // -1: variadic
};

inline constexpr BuiltinInfo kBuiltinInfos[] = {
#define MINIVM_BUILTIN_INFO(name, min, max) {#name, min, max},
    MINIVM_BUILTINS(MINIVM_BUILTIN_INFO)
#undef MINIVM_BUILTIN_INFO
};

inline const BuiltinInfo& GetBuiltinInfo(Builtin b) {
  return kBuiltinInfos[static_cast<uint8_t>(b)];
}

inline std::optional<Builtin> LookupBuiltin(std::string_view name) {
  for (size_t i = 0; i < sizeof(kBuiltinInfos) / sizeof(kBuiltinInfos[0]); ++i) {
    if (kBuiltinInfos[i].name == name) return static_cast<Builtin>(i);
  }
  return std::nullopt;
}

}  // namespace minivm

#endif  // MINIVM_VM_BYTECODE_BUILTINS_H_
