// Assertions for the VM (vm/runtime): base/check.h's mechanism, naming the VM
// in the message ("VM check failed: ..."). MINIVM_VM_CHECK stays on in
// release builds; MINIVM_VM_DCHECK states an invariant the code relies on and
// checks it in debug and sanitizer builds only.
#ifndef MINIVM_VM_RUNTIME_CHECK_H_
#define MINIVM_VM_RUNTIME_CHECK_H_

#include "base/check.h"

#define MINIVM_VM_CHECK(cond, fmt, ...) MINIVM_CHECK_AS("VM", cond, fmt __VA_OPT__(, ) __VA_ARGS__)
#define MINIVM_VM_DCHECK(cond, fmt, ...) \
  MINIVM_DCHECK_AS("VM", cond, fmt __VA_OPT__(, ) __VA_ARGS__)

#endif  // MINIVM_VM_RUNTIME_CHECK_H_
