// Assertions for the GC: base/check.h's mechanism, naming the heap in the
// message ("heap check failed: ..."). MINIVM_GC_CHECK guards invariants
// whose violation would corrupt the heap (a promotion that cannot fail did,
// a verifier finding) and stays on in release builds; MINIVM_GC_DCHECK is
// for everything else.
#ifndef MINIVM_GC_CHECK_H_
#define MINIVM_GC_CHECK_H_

#include "base/check.h"

#define MINIVM_GC_CHECK(cond, fmt, ...) \
  MINIVM_CHECK_AS("heap", cond, fmt __VA_OPT__(, ) __VA_ARGS__)
#define MINIVM_GC_DCHECK(cond, fmt, ...) \
  MINIVM_DCHECK_AS("heap", cond, fmt __VA_OPT__(, ) __VA_ARGS__)

#endif  // MINIVM_GC_CHECK_H_
