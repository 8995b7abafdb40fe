#include "gc/old_space.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "gc/check.h"

namespace minivm::gc {
namespace {

// Free cells: klass word null, next-free in the gc_word slot.
uintptr_t NextFree(uintptr_t cell) { return reinterpret_cast<Object*>(cell)->gc_word; }

bool IsFreeCell(uintptr_t cell) { return reinterpret_cast<Object*>(cell)->klass == nullptr; }

}  // namespace

OldSpace::OldSpace(uintptr_t base, size_t size)
    : base_(base), pages_(size / kPageSize), free_pages_(size / kPageSize) {}

void OldSpace::PushFree(size_t c, uintptr_t cell) {
  auto* o = reinterpret_cast<Object*>(cell);
  o->klass = nullptr;
  o->gc_word = free_lists_[c];
  free_lists_[c] = cell;
  ++free_counts_[c];
}

size_t OldSpace::FindFreeRun(size_t n) const {
  size_t run = 0;
  for (size_t i = lowest_free_; i < pages_.size(); ++i) {
    if (pages_[i].kind != PageKind::kFree) {
      run = 0;
      continue;
    }
    if (++run == n) return i + 1 - n;
  }
  return std::numeric_limits<size_t>::max();
}

void OldSpace::TakePages(size_t first, size_t n) {
  free_pages_ -= n;
  used_page_limit_ = std::max(used_page_limit_, first + n);
  if (first == lowest_free_) {
    lowest_free_ = first + n;
    while (lowest_free_ < pages_.size() && pages_[lowest_free_].kind != PageKind::kFree) {
      ++lowest_free_;
    }
  }
}

void OldSpace::ReleasePages(size_t first, size_t n) {
  for (size_t i = first; i < first + n; ++i) pages_[i] = Page{};
  free_pages_ += n;
  if (first < lowest_free_) lowest_free_ = first;
}

Object* OldSpace::AllocateSmall(size_t size) {
  const size_t c = SizeClassIndex(size);
  if (free_lists_[c] == 0) {
    const size_t i = FindFreeRun(1);
    if (i == std::numeric_limits<size_t>::max()) return nullptr;
    pages_[i] = Page{PageKind::kSmall, static_cast<uint8_t>(c), 0};
    TakePages(i, 1);
    const size_t cell = kSizeClasses[c];
    // Pushed in reverse so the page fills from its start.
    for (size_t k = CellsPerPage(c); k-- > 0;) PushFree(c, PageStart(i) + k * cell);
  }
  const uintptr_t cell = free_lists_[c];
  free_lists_[c] = NextFree(cell);
  --free_counts_[c];
  used_bytes_ += kSizeClasses[c];
  return reinterpret_cast<Object*>(cell);
}

Object* OldSpace::AllocateLarge(size_t size) {
  const size_t n = (size + kPageSize - 1) / kPageSize;
  if (n > free_pages_) return nullptr;
  const size_t i = FindFreeRun(n);
  if (i == std::numeric_limits<size_t>::max()) return nullptr;
  pages_[i] = Page{PageKind::kLargeHead, 0, static_cast<uint32_t>(n)};
  for (size_t k = 1; k < n; ++k) pages_[i + k] = Page{PageKind::kLargeTail, 0, 0};
  TakePages(i, n);
  used_bytes_ += n * kPageSize;
  return reinterpret_cast<Object*>(PageStart(i));
}

void OldSpace::ForEachObjectStartingIn(uintptr_t from, uintptr_t to,
                                       absl::FunctionRef<void(Object*)> fn) const {
  const size_t i = PageIndex(from);
  const Page& page = pages_[i];
  const uintptr_t start = PageStart(i);
  if (page.kind == PageKind::kSmall) {
    const size_t cell = kSizeClasses[page.size_class];
    const uintptr_t page_end = start + CellsPerPage(page.size_class) * cell;
    uintptr_t p = start + (from - start + cell - 1) / cell * cell;
    for (; p < to && p < page_end; p += cell) {
      if (!IsFreeCell(p)) fn(reinterpret_cast<Object*>(p));
    }
  } else if (page.kind == PageKind::kLargeHead && from == start) {
    fn(reinterpret_cast<Object*>(start));
  }
}

void OldSpace::ForEachObject(absl::FunctionRef<void(Object*)> fn) const {
  for (size_t i = 0; i < pages_.size(); ++i) {
    const Page& page = pages_[i];
    if (page.kind == PageKind::kSmall) {
      const size_t cell = kSizeClasses[page.size_class];
      for (size_t k = 0, n = CellsPerPage(page.size_class); k < n; ++k) {
        const uintptr_t p = PageStart(i) + k * cell;
        if (!IsFreeCell(p)) fn(reinterpret_cast<Object*>(p));
      }
    } else if (page.kind == PageKind::kLargeHead) {
      fn(reinterpret_cast<Object*>(PageStart(i)));
    }
  }
}

void OldSpace::Sweep() {
  free_lists_.fill(0);
  free_counts_.fill(0);
  used_bytes_ = 0;
  for (size_t i = 0; i < pages_.size(); ++i) {
    Page& page = pages_[i];
    if (page.kind == PageKind::kSmall) {
      const size_t c = page.size_class;
      const size_t cell = kSizeClasses[c];
      const size_t n = CellsPerPage(c);
      size_t live = 0;
      for (size_t k = 0; k < n; ++k) {
        auto* o = reinterpret_cast<Object*>(PageStart(i) + k * cell);
        if (o->klass == nullptr) continue;
        if (o->gc_word & gc_word::kMarked) {
          o->gc_word &= ~gc_word::kMarked;
          ++live;
        } else {
          o->klass = nullptr;
        }
      }
      if (live == 0) {
        ReleasePages(i, 1);
        continue;
      }
      used_bytes_ += live * cell;
      for (size_t k = n; k-- > 0;) {
        const uintptr_t p = PageStart(i) + k * cell;
        if (IsFreeCell(p)) PushFree(c, p);
      }
    } else if (page.kind == PageKind::kLargeHead) {
      auto* o = reinterpret_cast<Object*>(PageStart(i));
      const size_t n = page.run_pages;
      if (o->gc_word & gc_word::kMarked) {
        o->gc_word &= ~gc_word::kMarked;
        used_bytes_ += n * kPageSize;
      } else {
        ReleasePages(i, n);
      }
      i += n - 1;
    }
  }
}

bool OldSpace::CanFit(const std::array<uint64_t, kNumSizeClasses>& counts) const {
  size_t pages = 0;
  for (size_t c = 0; c < kNumSizeClasses; ++c) {
    if (counts[c] <= free_counts_[c]) continue;
    const uint64_t deficit = counts[c] - free_counts_[c];
    pages += (deficit + CellsPerPage(c) - 1) / CellsPerPage(c);
  }
  return pages <= free_pages_;
}

bool OldSpace::IsObjectStart(uintptr_t p) const {
  if (!Contains(p)) return false;
  const size_t i = PageIndex(p);
  const Page& page = pages_[i];
  const uintptr_t off = p - PageStart(i);
  if (page.kind == PageKind::kSmall) {
    const size_t cell = kSizeClasses[page.size_class];
    return off % cell == 0 && off / cell < CellsPerPage(page.size_class) && !IsFreeCell(p);
  }
  return page.kind == PageKind::kLargeHead && off == 0;
}

void OldSpace::VerifyFreeLists() const {
  for (size_t c = 0; c < kNumSizeClasses; ++c) {
    uint64_t n = 0;
    for (uintptr_t p = free_lists_[c]; p != 0; p = NextFree(p)) {
      MINIVM_GC_CHECK(Contains(p), "free list %d holds %#x outside the old space", c, p);
      const size_t i = PageIndex(p);
      MINIVM_GC_CHECK(pages_[i].kind == PageKind::kSmall && pages_[i].size_class == c,
                      "free cell %#x of class %d lies in a page of another kind/class", p, c);
      MINIVM_GC_CHECK((p - PageStart(i)) % kSizeClasses[c] == 0,
                      "free cell %#x is not cell-aligned", p);
      MINIVM_GC_CHECK(IsFreeCell(p), "free-list cell %#x holds an object", p);
      MINIVM_GC_CHECK(++n <= free_counts_[c], "free list %d is longer than its count (cycle?)", c);
    }
    MINIVM_GC_CHECK(n == free_counts_[c], "free list %d has %d cells, count says %d", c, n,
                    free_counts_[c]);
  }
  // Every free cell of a small page is on its list: count them.
  std::array<uint64_t, kNumSizeClasses> seen{};
  size_t free_pages = 0;
  for (size_t i = 0; i < pages_.size(); ++i) {
    const Page& page = pages_[i];
    if (page.kind == PageKind::kFree) ++free_pages;
    if (page.kind != PageKind::kSmall) continue;
    for (size_t k = 0, n = CellsPerPage(page.size_class); k < n; ++k) {
      if (IsFreeCell(PageStart(i) + k * kSizeClasses[page.size_class])) {
        ++seen[page.size_class];
      }
    }
  }
  MINIVM_GC_CHECK(seen == free_counts_, "free cells in pages differ from free-list counts");
  MINIVM_GC_CHECK(free_pages == free_pages_, "free page count %d, counted %d", free_pages_,
                  free_pages);
}

}  // namespace minivm::gc
