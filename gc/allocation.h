// The allocation path every mutator shares: the inline bump-pointer fast
// path on the thread's TLAB (Allocate) and the declaration of its one
// out-of-line slow path (AllocateSlowPath, generational_heap.cc).
//
// Design
// ------
// .fast: Allocate is two compares and a bump: `top + size > current_end`
//   (the TLAB is full, or the sampler lowered current_end to its next
//   point: gc/tlab.h, gc/sampler.h .arm) and `size > kMaxTlabObjectSize`
//   (a constant fold for field objects). Everything else (refills, outside-
//   TLAB and large objects, collections, sampling) is the slow path's, so
//   the fast path costs the same with the sampler on or off.
// .copies: JIT-compiled code inlines the same test and bump (EmitNew,
//   vm/jit/) and calls the same slow path through minivm_jit_new; the two
//   copies must agree, and the ctest jit_ir_invariance pins the JIT's.
// .zero: the TLAB is not zeroed in advance (gc/tlab.h); every allocation
//   zeroes its own object while it writes its first line anyway
//   (ZeroAllButKlass).
//
// Rejected: a fast path that also counts bytes for the sampler (a countdown
// per allocation costs every allocation to serve the rare sample; the moved
// current_end costs nothing); an out-of-line fast path (a call per object).
#ifndef MINIVM_GC_ALLOCATION_H_
#define MINIVM_GC_ALLOCATION_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/base/optimization.h"
#include "gc/mutator.h"
#include "gc/object.h"

namespace minivm::gc {

// Requests larger than this are refused up front (heap exhausted) so that
// `top + size` can never wrap on the fast path.
inline constexpr size_t kMaxObjectSize = size_t{1} << 40;

// The allocation slow path, the one out-of-line half of Allocate() below
// and the function JIT-compiled code calls when its inline fast path fails
// (through minivm_jit_new). Out of line and cold: the fast path must stay a
// handful of instructions. Defined in generational_heap.cc, where its design is.
//
// Precondition: size is the object's exact size (a multiple of 8, at least
// 16, at most kMaxObjectSize). May collect: the caller must hold every
// reference it still needs in a root. Returns the object with its header
// written, its body zeroed and, for array layouts, its length set; nullptr
// when even a full collection cannot find room (the caller raises "heap
// exhausted").
Object* AllocateSlowPath(Mutator* m, const ClassLayout* cls, size_t size,
                         uint64_t length);

// Objects larger than this never go into a TLAB or the young generation:
// they are allocated in the old generation's large-object space by the slow
// path (gc/size_classes.h; equal to kLargeObjectThreshold there).
inline constexpr size_t kMaxTlabObjectSize = size_t{8} << 10;

// Zeroes the gc_word and the body of the object of `size` bytes at `obj`.
// A TLAB is not zeroed in advance (tlab.h), so every allocation does this
// while it writes the object's first line anyway. Objects of up to 64 bytes
// (field objects of up to 6 fields, the common case) take unrolled stores: a
// call to memset for each made the interpreter slower on binary trees 16
// (1.07x CPU, benchmarks/compare_builds.py, 5 rounds).
inline void ZeroAllButKlass(uintptr_t obj, size_t size) {
  auto* w = reinterpret_cast<uint64_t*>(obj);
  switch (size / 8) {
    case 8:
      w[7] = 0;
      [[fallthrough]];
    case 7:
      w[6] = 0;
      [[fallthrough]];
    case 6:
      w[5] = 0;
      [[fallthrough]];
    case 5:
      w[4] = 0;
      [[fallthrough]];
    case 4:
      w[3] = 0;
      [[fallthrough]];
    case 3:
      w[2] = 0;
      [[fallthrough]];
    case 2:
      w[1] = 0;
      break;
    default:
      std::memset(w + 1, 0, size - 8);
  }
}

// The allocation entry point. `size` must be the exact object size for `cls`
// and `length` (see object.h) and at most kMaxObjectSize. `length` is ignored
// for kFields layouts. May collect (see AllocateSlowPath).
//
// The size test is a constant fold for field objects (their size is known at
// the call site) and one compare for arrays; it keeps large arrays out of
// TLABs so that every young object fits an old-generation size class.
inline Object* Allocate(Mutator* m, const ClassLayout* cls, size_t size,
                        uint64_t length) {
  const uintptr_t top = m->tlab.top;
  const uintptr_t new_top = top + size;
  if (ABSL_PREDICT_FALSE(new_top > m->tlab.current_end ||
                         size > kMaxTlabObjectSize)) {
    return AllocateSlowPath(m, cls, size, length);
  }
  m->tlab.top = new_top;
  auto* obj = reinterpret_cast<Object*>(top);
  ZeroAllButKlass(top, size);
  obj->klass = cls;
  if (cls->kind != LayoutKind::kFields) obj->set_length(length);
  return obj;
}

}  // namespace minivm::gc

#endif  // MINIVM_GC_ALLOCATION_H_
