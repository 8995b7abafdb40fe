// Bootstrap heap: one bump-pointer space carved into zero-filled TLABs, no
// collection. Replaced by the generational heap (docs/gc.md); the interface in
// heap.h is the one the generational heap implements.
#include "gc/heap.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace minivm::gc {
namespace {

constexpr size_t kTlabSize = size_t{64} << 10;
constexpr size_t kLargeObjectSize = size_t{16} << 10;

class BumpHeap final : public Heap {
 public:
  BumpHeap(uint8_t* base, size_t size, uint8_t* cards)
      : base_(base), limit_(base + size), top_(base), cards_(cards) {}
  ~BumpHeap() override {
    munmap(base_, limit_ - base_);
    munmap(cards_, CardBytes(limit_ - base_));
  }

  static size_t CardBytes(size_t heap) { return (heap >> kCardShift) + 1; }

  void AttachMutator(Mutator* m) override {
    m->heap = this;
    m->card_table_biased =
        cards_ - (reinterpret_cast<uintptr_t>(base_) >> kCardShift);
    m->tlab = Tlab{};
  }
  void DetachMutator(Mutator* m) override { m->tlab = Tlab{}; }

  Object* AllocateSlow(Mutator* m, const ClassLayout* cls, size_t size,
                       uint64_t length) override {
    uint8_t* mem = nullptr;
    if (size >= kLargeObjectSize) {
      mem = Bump(size);
    } else {
      uint8_t* tlab = Bump(kTlabSize);
      if (tlab == nullptr) {
        mem = Bump(size);
      } else {
        m->tlab.start = reinterpret_cast<uintptr_t>(tlab);
        m->tlab.top = m->tlab.start + size;
        m->tlab.end = m->tlab.start + kTlabSize;
        m->tlab.current_end = m->tlab.end;
        mem = tlab;
      }
    }
    if (mem == nullptr) return nullptr;
    auto* obj = reinterpret_cast<Object*>(mem);
    obj->klass = cls;
    if (cls->kind != LayoutKind::kFields) obj->set_length(length);
    return obj;
  }

  void CollectGarbage(Mutator*, GcCause) override {
    absl::MutexLock lock(&mu_);
    ++stats_.full_collections;
  }
  void SafepointPoll(Mutator* m) override { m->poll.store(0); }
  void EnterBlocked(Mutator*) override {}
  void LeaveBlocked(Mutator*) override {}
  bool Contains(const void* p) const override {
    auto* b = static_cast<const uint8_t*>(p);
    return b >= base_ && b < limit_;
  }
  HeapStats Stats() const override {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  // Fresh mmap memory is zero, and nothing is reused, so every chunk handed
  // out is zero-filled as the TLAB invariant requires.
  uint8_t* Bump(size_t size) {
    absl::MutexLock lock(&mu_);
    if (static_cast<size_t>(limit_ - top_) < size) return nullptr;
    uint8_t* p = top_;
    top_ += size;
    stats_.bytes_allocated += size;
    return p;
  }

  uint8_t* const base_;
  uint8_t* const limit_;
  mutable absl::Mutex mu_;
  uint8_t* top_ ABSL_GUARDED_BY(mu_);
  HeapStats stats_ ABSL_GUARDED_BY(mu_);
  uint8_t* const cards_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Heap>> Heap::Create(const HeapOptions& options,
                                                   VmInterface*) {
  const size_t size = options.max_heap_bytes;
  if (size < (size_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("heap size ", size, " is below the minimum of 1m"));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve a heap of ", size, " bytes"));
  }
  void* cards = mmap(nullptr, BumpHeap::CardBytes(size), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (cards == MAP_FAILED) {
    munmap(base, size);
    return absl::ResourceExhaustedError("cannot reserve the card table");
  }
  return std::unique_ptr<Heap>(new BumpHeap(static_cast<uint8_t*>(base), size,
                                            static_cast<uint8_t*>(cards)));
}

Object* AllocateSlowPath(Mutator* m, const ClassLayout* cls, size_t size,
                         uint64_t length) {
  return m->heap->AllocateSlow(m, cls, size, length);
}

}  // namespace minivm::gc
