// Always-on and debug-only assertions, for the GC and (through the macros
// below) for every component above it.
//
// MINIVM_GC_CHECK guards invariants whose violation would corrupt the heap
// (a promotion that cannot fail did, a verifier finding); it stays on in
// release builds. MINIVM_GC_DCHECK is for everything else. Both print a
// formatted message with absl::FPrintF and abort, so death tests can match it.
//
// The mechanism is MINIVM_CHECK_AS / MINIVM_DCHECK_AS, which name the
// component in the message ("heap check failed: ..."). It is defined here
// because gc/ is the bottom layer, which every component may include; each
// component has its own small header that names itself and nothing more
// (vm/runtime/check.h: MINIVM_VM_*, agent_api/check.h: MINIVM_AGENT_*).
#ifndef MINIVM_GC_CHECK_H_
#define MINIVM_GC_CHECK_H_

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

#define MINIVM_GC_CHECK(cond, fmt, ...) \
  MINIVM_CHECK_AS("heap", cond, fmt __VA_OPT__(, ) __VA_ARGS__)
#define MINIVM_GC_DCHECK(cond, fmt, ...) \
  MINIVM_DCHECK_AS("heap", cond, fmt __VA_OPT__(, ) __VA_ARGS__)

#endif  // MINIVM_GC_CHECK_H_
