// Which calls the optimising tier inlines (calls.cc .inline): the size,
// depth, recursion and budget limits, decided on bytecode alone. No LLVM,
// so it is tested on its own.
//
// Design:
// .inline.small  A callee is inlined when it is small (kMaxInlineBytecode
//    bytes), has no loops or spawns (an inlined body is bounded work, so it
//    needs no poll of its own), and every function it calls is a small leaf
//    that inlines too: compile time grows with every call site left in a
//    body. The limit is room for a constructor-like function of a few
//    fields, a getter, a small arithmetic helper: a field read is 9 bytes,
//    a NEW 6, a small-integer push 2 to 10 (HotSpot's MaxInlineSize is 35
//    bytes of its denser bytecode).
// .inline.recursive  A recursive function is inlined into itself up to
//    kMaxRecursiveInlineLevel copies deep and may be larger
//    (kMaxRecursiveInlineBytecode): each level of copies halves the real
//    calls on every recursive path (fib's body holds six copies of itself,
//    and the four innermost make real calls), and a real call costs more
//    than in HotSpot because its Frame is written (docs/jit.md, "Calls").
//    Its own calls need not inline away. Rejected: one level (HotSpot's
//    MaxRecursiveInlineLevel), which leaves twice the real calls; three
//    levels, which multiply the compile work for few fewer instructions.
// .inline.bounded  Bodies nest at most kMaxInlineDepth deep, and one
//    function inlines at most kInlineBudget bytes in all, so compile work
//    per function stays bounded (a function of 600 calls to small
//    functions inlines the first few dozen and calls the rest).
// .inline.verified  Code the verifier refuses stays interpreted, so it is
//    called, not inlined (inlining it would refuse the caller too).
#ifndef MINIVM_VM_JIT_INLINE_POLICY_H_
#define MINIVM_VM_JIT_INLINE_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "vm/bytecode/program.h"

namespace minivm::jit {

// .inline.small: the largest callee inlined, in bytes of bytecode.
inline constexpr size_t kMaxInlineBytecode = 64;
// .inline.recursive: the largest recursive function inlined into itself
// (binary trees' bottom_up and check are 84 and 77 bytes, fib 62), and
// its copies inside itself, nested.
inline constexpr size_t kMaxRecursiveInlineBytecode = 128;
inline constexpr int kMaxRecursiveInlineLevel = 2;
// .inline.bounded: bytecode inlined into one function, all sites together,
// and inlined bodies within inlined bodies, at most.
inline constexpr size_t kInlineBudget = 2048;
inline constexpr int kMaxInlineDepth = 3;

// Calls of `fn`, in order: CALL targets' indices; nullopt if `fn` spawns or
// loops (never inlined).
std::optional<std::vector<uint32_t>> CallsOfLoopFree(const Function& fn);

// A small function without calls, loops or spawns.
bool IsSmallLeaf(const Function& fn);

// Where a call site is: the tier and what the function being compiled has
// inlined so far.
struct InlineSite {
  bool optimising = true;    // inlining is the optimising tier's
  bool self = false;         // the callee is the function being compiled
  size_t inlined_bytes = 0;  // already inlined into the function (.inline.bounded)
  int depth = 0;             // inlined bodies around the call site
  int copies = 0;            // of the callee in that chain, the function's own body included
};

// Whether the CALL of `callee` at `site` is inlined (.inline.small ...
// .inline.verified).
bool ShouldInline(const Program& program, const Function& callee, const InlineSite& site);

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_INLINE_POLICY_H_
