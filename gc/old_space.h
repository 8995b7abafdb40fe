// The old generation: a non-moving mark-sweep space of size-class pages plus
// the large-object space (LOS), both carved from one range of kPageSize pages.
//
// Design:
// .mark-sweep  Non-moving mark-sweep rather than mark-compact: promotion and LOS
//    allocation never move an object, the agent API's weak slots for old
//    objects never change, and the sweep is one pass over page metadata and
//    cells. Fragmentation is bounded by size classes (size_classes.h) and by
//    returning wholly empty pages to the page pool, where any class or a
//    large object can reuse them. Rejected: mark-compact (Lisp2 needs three
//    passes and a forwarding table, and moving old objects would turn every
//    full GC into a flood of "moved" events).
// .pages  A small page holds cells of one class only, so the object starts in any
//    card are computable (ForEachObjectStartingIn). A free cell has a null
//    klass word (objects never do) and links the class's free list through
//    its second word; every cell of a page is either an object or free, so
//    pages are always parsable.
// .large  A large object (size > kLargeObjectThreshold) takes a run of whole
//    pages, header at the first page; it is allocated by mutators outside any
//    TLAB (the "alloc_major" path, which the sampler must cover) and zeroed
//    by the allocating thread outside the heap lock. Runs are found first-fit
//    from the lowest free page.
// .when  Small cells are only allocated inside a pause (promotion); large runs by
//    mutators under the owner's lock. Sweep runs inside the pause.
// .marks  Marks live in the object's gc_word (kMarked); Sweep clears them.
#ifndef MINIVM_GC_OLD_SPACE_H_
#define MINIVM_GC_OLD_SPACE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "gc/object.h"
#include "gc/size_classes.h"

namespace minivm::gc {

class OldSpace {
 public:
  OldSpace(uintptr_t base, size_t size);
  OldSpace(const OldSpace&) = delete;
  OldSpace& operator=(const OldSpace&) = delete;

  uintptr_t base() const { return base_; }
  uintptr_t limit() const { return base_ + pages_.size() * kPageSize; }
  bool Contains(uintptr_t p) const { return p - base_ < pages_.size() * kPageSize; }
  // The end of the highest page ever used: no object has been above it, so
  // its cards were never dirtied, and a card scan may stop there. With the
  // occupancy target (collection.cc .occupancy) that is far below limit().
  uintptr_t used_limit() const { return base_ + used_page_limit_ * kPageSize; }

  // A cell for a promoted object of `size` bytes (<= kLargeObjectThreshold).
  // Contents are garbage: the caller copies the whole object over it.
  Object* AllocateSmall(size_t size);
  // A run of pages for a large object, not zeroed (the allocation slow path
  // zeroes the object, gc/generational_heap.cc); nullptr when no run fits.
  Object* AllocateLarge(size_t size);

  // Calls fn for every object whose header lies in [from, to), which must lie
  // within one page (a card does).
  void ForEachObjectStartingIn(uintptr_t from, uintptr_t to,
                               absl::FunctionRef<void(Object*)> fn) const;
  void ForEachObject(absl::FunctionRef<void(Object*)> fn) const;

  // Frees every unmarked object, clears marks, rebuilds the free lists and
  // returns empty pages to the pool. Runs inside a pause.
  void Sweep();

  // Whether `size_class` cells for `counts[c]` objects of each class fit
  // without failing (the full collection's evacuation check).
  bool CanFit(const std::array<uint64_t, kNumSizeClasses>& counts) const;

  // True when p is the start of an allocated object.
  bool IsObjectStart(uintptr_t p) const;
  // CHECK-fails when a free list is malformed.
  void VerifyFreeLists() const;

  size_t free_pages() const { return free_pages_; }
  size_t total_pages() const { return pages_.size(); }
  // Bytes of cells and runs holding objects (cells count whole).
  size_t used_bytes() const { return used_bytes_; }
  size_t capacity() const { return pages_.size() * kPageSize; }

 private:
  enum class PageKind : uint8_t { kFree, kSmall, kLargeHead, kLargeTail };
  struct Page {
    PageKind kind = PageKind::kFree;
    uint8_t size_class = 0;
    uint32_t run_pages = 0;  // kLargeHead: pages in the run
  };

  uintptr_t PageStart(size_t i) const { return base_ + i * kPageSize; }
  size_t PageIndex(uintptr_t p) const { return (p - base_) / kPageSize; }
  // First-fit run of n free pages; SIZE_MAX when none.
  size_t FindFreeRun(size_t n) const;
  void TakePages(size_t first, size_t n);
  void ReleasePages(size_t first, size_t n);
  void PushFree(size_t c, uintptr_t cell);

  const uintptr_t base_;
  std::vector<Page> pages_;
  size_t free_pages_ = 0;
  size_t lowest_free_ = 0;  // no free page below this index
  size_t used_page_limit_ = 0;  // no page at or above this index was ever taken
  size_t used_bytes_ = 0;
  std::array<uintptr_t, kNumSizeClasses> free_lists_{};  // 0 = empty
  std::array<uint64_t, kNumSizeClasses> free_counts_{};
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_OLD_SPACE_H_
