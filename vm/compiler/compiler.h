// Source to bytecode: lexer -> parser (AST) -> compiler, all errors of a file
// collected and reported before anything runs.
#ifndef MINIVM_VM_COMPILER_COMPILER_H_
#define MINIVM_VM_COMPILER_COMPILER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vm/bytecode/program.h"

namespace minivm {

// A syntax or name error at a 1-based line and column.
struct Diagnostic {
  int line = 0;
  int column = 0;
  std::string message;
};

// Errors reported at most (like a C compiler's error limit): after the
// first kMaxReportedErrors in source order, one more diagnostic "too many
// errors", at the position of the next one, ends the list.
inline constexpr size_t kMaxReportedErrors = 20;

struct CompileResult {
  std::unique_ptr<Program> program;  // null when errors is not empty
  std::vector<Diagnostic> errors;    // in source order, bounded (above)
};

// Compiles a whole program. `path` is recorded in the Program and used in
// messages; the source need not be NUL-terminated and may hold any bytes.
// Never crashes, however malformed the input (fuzzed: tests/fuzz/).
CompileResult Compile(std::string_view path, std::string_view source);

// "path:line:col: error: message"
std::string FormatDiagnostic(std::string_view path, const Diagnostic& d);

}  // namespace minivm

#endif  // MINIVM_VM_COMPILER_COMPILER_H_
