#include "vm/runtime/errors.h"

#include "absl/strings/str_cat.h"

namespace minivm {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
#define MINIVM_ERROR_KIND_NAME(e, name) \
  case ErrorKind::e:                    \
    return name;
    MINIVM_ERROR_KINDS(MINIVM_ERROR_KIND_NAME)
#undef MINIVM_ERROR_KIND_NAME
  }
  return "error";
}

std::string FormatRuntimeError(const RuntimeError& error, const ReportedTrace& trace,
                               std::string_view path) {
  std::string out = absl::StrCat("error: ", ErrorKindName(error.kind));
  if (!error.message.empty()) absl::StrAppend(&out, ": ", error.message);
  out += '\n';
  for (size_t i = 0; i < trace.frames.size(); ++i) {
    if (trace.omitted != 0 && i == kTraceInnermostFrames) {
      absl::StrAppend(&out, "  ... ", trace.omitted, trace.omitted == 1 ? " frame" : " frames",
                      " omitted\n");
    }
    const StackTraceEntry& e = trace.frames[i];
    absl::StrAppend(&out, "  at ", e.function, " (", absl::string_view(path.data(), path.size()),
                    ":", e.line, ")\n");
  }
  return out;
}

}  // namespace minivm
