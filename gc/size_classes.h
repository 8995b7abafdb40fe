// Size classes of the old generation's small-object pages.
//
// .one-class  Every old-generation page (kPageSize bytes) holds cells of one size
//    class, so the start of every object in a page is computable from the
//    page's class alone: card scanning finds the objects whose header lies in
//    a 512-byte card by arithmetic, with no crossing map or block offset
//    table (rejected: HotSpot's block-offset table, needed only because its
//    old space is bump-allocated with arbitrary sizes).
// .steps  Classes step by 8 bytes up to 64, then four per doubling, so a cell
//    wastes at most ~24% of the object it holds. kWorstCaseExpansion (class
//    rounding times the unused tail of a page) bounds how much old space a
//    given number of promoted bytes can need; the promotion guarantee uses it.
// .large  Objects larger than kLargeObjectThreshold never enter the young
//    generation: they live in the large-object space (whole pages).
#ifndef MINIVM_GC_SIZE_CLASSES_H_
#define MINIVM_GC_SIZE_CLASSES_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "gc/allocation.h"

namespace minivm::gc {

inline constexpr size_t kPageSize = size_t{32} << 10;
inline constexpr size_t kLargeObjectThreshold = size_t{8} << 10;
static_assert(kLargeObjectThreshold == kMaxTlabObjectSize);

inline constexpr std::array<uint32_t, 35> kSizeClasses = {
    16,   24,   32,   40,   48,   56,   64,   80,   96,   112,  128,  160,
    192,  224,  256,  320,  384,  448,  512,  640,  768,  896,  1024, 1280,
    1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192};
inline constexpr size_t kNumSizeClasses = kSizeClasses.size();
static_assert(kSizeClasses.back() == kLargeObjectThreshold);

// Index of the smallest class holding `size` bytes (16 <= size <=
// kLargeObjectThreshold, a multiple of 8). A table lookup: it runs once per
// promoted object.
uint8_t SizeClassIndex(size_t size);

inline constexpr uint32_t CellsPerPage(size_t size_class) {
  return static_cast<uint32_t>(kPageSize / kSizeClasses[size_class]);
}

// max over sizes s of (bytes of pages needed per byte of objects of size s).
double WorstCaseExpansion();

}  // namespace minivm::gc

#endif  // MINIVM_GC_SIZE_CLASSES_H_
