// The int mask a call writes into its frame's pc word (frames.cc
// .frame.int-mask). No LLVM, so it is tested on its own.
#ifndef MINIVM_VM_JIT_FRAMES_H_
#define MINIVM_VM_JIT_FRAMES_H_

#include <cstdint>

#include "vm/jit/path_state.h"

namespace minivm::jit {

// The slots a call leaves out of its write-back: among the frame's first
// Frame::kMaskSlots and the `n` written, those below `keep_from` (under the
// arguments) that `path` proves to be ints and whose homes do not hold
// them already. Bit i names slot i.
uint32_t IntMaskAtCall(const PathState& path, int n, int keep_from);

// Slot i is one an int mask names.
bool InMask(uint32_t mask, int i);

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_FRAMES_H_
