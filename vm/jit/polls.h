// Where compiled code polls for safepoints (polls.cc .poll.where,
// .poll.once). No LLVM, so it is tested on its own.
#ifndef MINIVM_VM_JIT_POLLS_H_
#define MINIVM_VM_JIT_POLLS_H_

namespace minivm::jit {

// Whether a real call polls: quick code at every one, as the interpreter
// does; optimised code only where no real call was made yet on some path
// from the activation's start or a loop header (`path_polled` false,
// path_state.h .path.polled).
constexpr bool PollsAtCall(bool optimising, bool path_polled) {
  return !optimising || !path_polled;
}

// Whether a loop back-edge polls: always, in both tiers (polls.cc .poll.where).
constexpr bool PollsAtBackEdge() { return true; }

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_POLLS_H_
