#include "gc/card_table.h"

#include <sys/mman.h>

#include <cstring>

#include "absl/strings/str_format.h"

namespace minivm::gc {

CardTable::~CardTable() {
  if (cards_ != nullptr) munmap(cards_, bytes_);
}

absl::Status CardTable::Init(uintptr_t heap_base, size_t heap_size) {
  bytes_ = (heap_size >> kCardShift) + 1;
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot reserve a card table of %d bytes", bytes_));
  }
  cards_ = static_cast<uint8_t*>(p);
  // Biased so that card_table_biased[a >> kCardShift] is a's card; computed
  // in integers to keep the out-of-range intermediate out of pointer math.
  biased_ =
      reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(cards_) - (heap_base >> kCardShift));
  return absl::OkStatus();
}

void CardTable::ForEachDirtyCard(uintptr_t from, uintptr_t to,
                                 absl::FunctionRef<void(uintptr_t)> fn) const {
  const uint8_t* c = CardFor(from);
  const uint8_t* const end = CardFor(to);
  while (c < end) {
    if ((reinterpret_cast<uintptr_t>(c) & 7) == 0 && c + 8 <= end) {
      uint64_t word;
      std::memcpy(&word, c, 8);
      if (word == 0) {
        c += 8;
        continue;
      }
    }
    if (*c != kCleanCard) {
      fn(from + (static_cast<uintptr_t>(c - CardFor(from)) << kCardShift));
    }
    ++c;
  }
}

void CardTable::Clear(uintptr_t from, uintptr_t to) const {
  std::memset(CardFor(from), kCleanCard, CardFor(to) - CardFor(from));
}

}  // namespace minivm::gc
