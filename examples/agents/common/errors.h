// Errors at the VMTI boundary, as every tool agent handles them: a VMTI call
// that fails is logged and counted (ErrorLog), and a C++ exception never
// unwinds out of an event callback into the VM (Guard).
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_ERRORS_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_ERRORS_H_

#include <atomic>
#include <cstdint>
#include <exception>

#include "vmti/vmti.h"

namespace agent {

// Logs failed VMTI calls: the first few by name on stderr, then only a
// count, which the agent prints at the end. Thread-safe.
class ErrorLog {
 public:
  explicit ErrorLog(const char* agent) : agent_(agent) {}
  // Returns true iff err is VMTI_ERROR_NONE; otherwise logs it.
  bool Check(vmtiEnv* env, vmtiError err, const char* what);
  int64_t count() const { return count_.load(std::memory_order_relaxed); }
  const char* agent() const { return agent_; }

 private:
  const char* agent_;
  std::atomic<int64_t> count_{0};
};

// Reports an exception caught at a callback boundary: the first few on
// stderr, then silently.
void ReportException(const char* agent, const char* callback, const char* what);

// Runs a callback body so that no C++ exception unwinds into the VM (whose
// callers are C and hold VM state across the call): one caught is reported
// (ReportException) and the event dropped.
template <typename F>
void Guard(const char* agent, const char* callback, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    ReportException(agent, callback, e.what());
  } catch (...) {
    ReportException(agent, callback, "unknown exception");
  }
}

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_ERRORS_H_
