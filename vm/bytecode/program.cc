#include "vm/bytecode/program.h"

#include <algorithm>

namespace minivm {

int LineTable::LineFor(uint32_t offset) const {
  if (entries_.empty()) return 0;
  auto it = std::upper_bound(
      entries_.begin(), entries_.end(), offset,
      [](uint32_t off, const std::pair<uint32_t, int>& e) { return off < e.first; });
  if (it == entries_.begin()) return entries_.front().second;
  return std::prev(it)->second;
}

}  // namespace minivm
