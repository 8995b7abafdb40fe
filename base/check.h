// Always-on and debug-only assertions: the mechanism every component's own
// check header names itself through (gc/check.h: MINIVM_GC_*,
// vm/runtime/check.h: MINIVM_VM_*, agent_api/check.h: MINIVM_AGENT_*).
//
// MINIVM_CHECK_AS guards invariants whose violation would corrupt state
// (a promotion that cannot fail did, a verifier finding); it stays on in
// release builds. MINIVM_DCHECK_AS is for everything else. Both print a
// formatted message with absl::FPrintF, naming the component ("heap check
// failed: ..."), and abort, so death tests can match it.
#ifndef MINIVM_BASE_CHECK_H_
#define MINIVM_BASE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#include "absl/base/optimization.h"
#include "absl/strings/str_format.h"

// `what` is a string literal naming the component.
#define MINIVM_CHECK_AS(what, cond, fmt, ...)                                                  \
  do {                                                                                         \
    if (ABSL_PREDICT_FALSE(!(cond))) {                                                         \
      absl::FPrintF(stderr, "%s:%d: " what " check failed: %s: " fmt "\n", __FILE__, __LINE__, \
                    #cond __VA_OPT__(, ) __VA_ARGS__);                                         \
      std::fflush(stderr);                                                                     \
      std::abort();                                                                            \
    }                                                                                          \
  } while (false)

#ifdef NDEBUG
#define MINIVM_DCHECK_AS(what, cond, fmt, ...) \
  do {                                         \
  } while (false && (cond))
#else
#define MINIVM_DCHECK_AS(what, cond, fmt, ...) \
  MINIVM_CHECK_AS(what, cond, fmt __VA_OPT__(, ) __VA_ARGS__)
#endif

#endif  // MINIVM_BASE_CHECK_H_
