// Which of NEW's fields the allocation fast path need not zero
// (allocation.cc .alloc.zeroing). No LLVM, so it is tested on its own.
#ifndef MINIVM_VM_JIT_ALLOCATION_H_
#define MINIVM_VM_JIT_ALLOCATION_H_

#include <cstdint>

#include "vm/bytecode/program.h"
#include "vm/bytecode/verifier.h"

namespace minivm::jit {

// How many of the fields of the object the NEW at `off` of `fn` allocates
// are stored (by its INIT_FIELDS) with no GC point, block entry or side exit
// between: those need no zeroing. `verified` is fn's (VerifyFunction).
uint64_t FilledBeforeAnyGcPoint(const Function& fn, const VerifiedCode& verified, uint32_t off);

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_ALLOCATION_H_
