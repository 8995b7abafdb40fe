// Bytecode generation: one function body's AST (or the global initialisers)
// to bytecode, with name resolution and the checks that need it (arity,
// break outside a loop, redefinitions of locals) done in the same walk. The
// encoding itself is the Emitter's (emitter.h); LLVM IR generation for the
// JIT is vm/jit/ir_generator.h.
#ifndef MINIVM_VM_COMPILER_BYTECODE_GENERATOR_H_
#define MINIVM_VM_COMPILER_BYTECODE_GENERATOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "vm/bytecode/program.h"
#include "vm/compiler/ast.h"
#include "vm/compiler/compiler.h"

namespace minivm::compiler {

// Encoding limits (opcodes.h operand widths).
inline constexpr int kMaxArgs = 255;      // CALL/NEW/SPAWN argc is u8
inline constexpr int kMaxLocals = 65535;  // num_locals is u16
inline constexpr int kMaxStack = 65535;   // max_stack is u16
inline constexpr int kMaxFields = 65535;  // FieldCache packs a 16-bit slot

// What the declaration pass (compiler.cc) learned, shared by every function.
struct CompileContext {
  Program* program = nullptr;
  std::vector<Diagnostic>* diagnostics = nullptr;
  absl::flat_hash_map<std::string, uint32_t> functions;  // name -> index
  absl::flat_hash_map<std::string, uint32_t> classes;    // name -> index
  absl::flat_hash_map<std::string, uint32_t> globals;    // name -> index
  std::vector<const FnDecl*> fn_decls;                   // by function index
  absl::flat_hash_map<std::string, uint32_t> strings;    // constant -> index

  void Error(Pos pos, std::string message);
  uint32_t InternString(const std::string& s);
};

// Compiles `decl` into `fn` (name, arity and index already set).
void CompileFunctionBody(CompileContext* ctx, const FnDecl& decl, Function* fn);

// Compiles the global initialisers of `module`, in source order, into `fn`.
void CompileGlobalInitializers(CompileContext* ctx, const Module& module, Function* fn);

}  // namespace minivm::compiler

#endif  // MINIVM_VM_COMPILER_BYTECODE_GENERATOR_H_
