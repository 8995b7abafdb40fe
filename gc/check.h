// Always-on and debug-only assertions for the GC.
//
// MINIVM_GC_CHECK guards invariants whose violation would corrupt the heap
// (a promotion that cannot fail did, a verifier finding); it stays on in
// release builds. MINIVM_GC_DCHECK is for everything else. Both print a
// formatted message with absl::FPrintF and abort, so death tests can match it.
#ifndef MINIVM_GC_CHECK_H_
#define MINIVM_GC_CHECK_H_

#include <cstdio>
#include <cstdlib>

#include "absl/base/optimization.h"
#include "absl/strings/str_format.h"

#define MINIVM_GC_CHECK(cond, fmt, ...)                                                    \
  do {                                                                                     \
    if (ABSL_PREDICT_FALSE(!(cond))) {                                                     \
      absl::FPrintF(stderr, "%s:%d: heap check failed: %s: " fmt "\n", __FILE__, __LINE__, \
                    #cond __VA_OPT__(, ) __VA_ARGS__);                                     \
      std::fflush(stderr);                                                                 \
      std::abort();                                                                        \
    }                                                                                      \
  } while (false)

#ifdef NDEBUG
#define MINIVM_GC_DCHECK(cond, fmt, ...) \
  do {                                   \
  } while (false && (cond))
#else
#define MINIVM_GC_DCHECK(cond, fmt, ...) MINIVM_GC_CHECK(cond, fmt __VA_OPT__(, ) __VA_ARGS__)
#endif

#endif  // MINIVM_GC_CHECK_H_
