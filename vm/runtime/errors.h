// Runtime errors: their kinds (docs/language.md, "Errors"), the pending error
// a thread carries out of the dispatch loop, and stack traces.
//
// The dispatch loop never throws: an instruction that fails records a
// RuntimeError on its VMThread (with the frame's pc written back, so the trace
// points at the faulting instruction) and the loop returns Outcome::kError.
// The VM then formats the error and the trace, once per VM, and ends it.
#ifndef MINIVM_VM_RUNTIME_ERRORS_H_
#define MINIVM_VM_RUNTIME_ERRORS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minivm {

// X(enumerator, the kind as printed)
#define MINIVM_ERROR_KINDS(X)               \
  X(kTypeError, "type error")               \
  X(kUnknownField, "unknown field")         \
  X(kIndexOutOfRange, "index out of range") \
  X(kDivisionByZero, "division by zero")    \
  X(kNullDereference, "null dereference")   \
  X(kStackOverflow, "stack overflow")       \
  X(kHeapExhausted, "heap exhausted")       \
  X(kAssertionFailed, "assertion failed")   \
  X(kValueError, "value error")

enum class ErrorKind {
#define MINIVM_ERROR_KIND_ENUM(e, name) e,
  MINIVM_ERROR_KINDS(MINIVM_ERROR_KIND_ENUM)
#undef MINIVM_ERROR_KIND_ENUM
};

const char* ErrorKindName(ErrorKind kind);

struct RuntimeError {
  ErrorKind kind = ErrorKind::kTypeError;
  std::string message;  // may be empty (a bare `assert(c)`)
};

// One line of a stack trace.
struct StackTraceEntry {
  std::string function;  // "<globals>" for the global initialisers
  int line = 0;
  uint32_t bytecode_offset = 0;  // of the instruction the frame is at
};

// A reported trace is bounded (docs/language.md, "Errors"): a stack deeper
// than kTraceInnermostFrames + kTraceOutermostFrames frames shows its
// innermost kTraceInnermostFrames and outermost kTraceOutermostFrames frames
// and one line "  ... N frames omitted" between them, as the JVM does for
// deep traces. So a stack overflow at --stack-depth=1000000 prints 62
// lines, not a million, and what it shows is where the recursion is (the
// innermost frames) and how it was entered (the outermost).
inline constexpr size_t kTraceInnermostFrames = 50;
inline constexpr size_t kTraceOutermostFrames = 10;

struct ReportedTrace {
  // Innermost first. With omitted > 0: the innermost frames kept, then the
  // outermost (kTraceInnermostFrames and kTraceOutermostFrames for an error;
  // VMThread::StackTrace takes other bounds, e.g. a thread dump's).
  std::vector<StackTraceEntry> frames;
  size_t omitted = 0;  // frames of the stack between those two runs
};

// "error: <kind>: <message>\n" (or "error: <kind>\n" for an empty message),
// then "  at fn (path:line)\n" per frame, innermost first, with
// "  ... N frames omitted\n" where frames were left out.
std::string FormatRuntimeError(const RuntimeError& error, const ReportedTrace& trace,
                               std::string_view path);

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_ERRORS_H_
