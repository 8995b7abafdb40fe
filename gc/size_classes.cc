#include "gc/size_classes.h"

#include <algorithm>

namespace minivm::gc {
namespace {

struct Table {
  std::array<uint8_t, kLargeObjectThreshold / 8 + 1> index{};
  double expansion = 1.0;
  Table() {
    size_t c = 0;
    for (size_t words = 2; words <= kLargeObjectThreshold / 8; ++words) {
      while (kSizeClasses[c] < words * 8) ++c;
      index[words] = static_cast<uint8_t>(c);
      const double used = static_cast<double>(CellsPerPage(c)) * kSizeClasses[c];
      const double e = (static_cast<double>(kSizeClasses[c]) / (words * 8)) *
                       (static_cast<double>(kPageSize) / used);
      expansion = std::max(expansion, e);
    }
  }
};

const Table& GetTable() {
  static const Table table;
  return table;
}

}  // namespace

uint8_t SizeClassIndex(size_t size) { return GetTable().index[size >> 3]; }

double WorstCaseExpansion() { return GetTable().expansion; }

}  // namespace minivm::gc
