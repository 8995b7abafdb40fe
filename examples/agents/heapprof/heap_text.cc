#include "heap_text.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "../common/options.h"

namespace heapprof {
namespace {



struct Line {
  const Row* row;
  int64_t inuse_objects, inuse_bytes, alloc_objects, alloc_bytes;
};

// pprof rejects a line with 0 objects and a non-zero size; a rounding
// residue could make one (an estimate's objects are >= 1 per sample, so
// only by rounding), and then the size is the truer figure.
void FixCount(int64_t* objects, int64_t bytes) {
  if (*objects == 0 && bytes != 0) *objects = 1;
}

}  // namespace

bool FrameOfAddress(uint64_t address, size_t frame_count, uint32_t* frame) {
  if (address < kFrameBase) return false;
  uint64_t f = (address - kFrameBase) / 16;
  if (f >= frame_count) return false;
  *frame = static_cast<uint32_t>(f);
  return true;
}

std::string BuildLegacyText(const std::vector<Row>& rows, const agent::SiteTable::Snapshot& sites,
                            int64_t interval, ProfileKind kind,
                            const std::vector<std::string>& comments) {
  std::vector<Line> lines;
  Line total{nullptr, 0, 0, 0, 0};
  for (const Row& r : rows) {
    Line l{&r, RoundCount(r.totals.inuse_objects), RoundCount(r.totals.inuse_bytes),
           RoundCount(r.totals.alloc_objects), RoundCount(r.totals.alloc_bytes)};
    if (l.inuse_objects == 0 && l.inuse_bytes == 0 && l.alloc_objects == 0 && l.alloc_bytes == 0) {
      continue;
    }
    FixCount(&l.inuse_objects, l.inuse_bytes);
    FixCount(&l.alloc_objects, l.alloc_bytes);
    total.inuse_objects += l.inuse_objects;
    total.inuse_bytes += l.inuse_bytes;
    total.alloc_objects += l.alloc_objects;
    total.alloc_bytes += l.alloc_bytes;
    lines.push_back(l);
  }
  bool inuse = kind == ProfileKind::kHeap;
  std::stable_sort(lines.begin(), lines.end(), [inuse](const Line& a, const Line& b) {
    return inuse ? a.inuse_bytes > b.inuse_bytes : a.alloc_bytes > b.alloc_bytes;
  });
  std::string out;
  char buf[512];
  auto counts = [&buf](const Line& l) {
    std::snprintf(buf, sizeof buf, "%" PRId64 ": %" PRId64 " [%" PRId64 ": %" PRId64 "] @",
                  l.inuse_objects, l.inuse_bytes, l.alloc_objects, l.alloc_bytes);
    return std::string(buf);
  };
  out += "heap profile: " + counts(total) + " heapprofile\n";
  std::snprintf(buf, sizeof buf,
                "# minivm heapprof, sampling interval %" PRId64
                " bytes. Values are unbiased estimates\n"
                "# for the whole heap, hence \"heapprofile\" rather than Go's \"heap/%" PRId64
                "\",\n"
                "# which would have pprof scale them again.\n"
                "# Addresses stand for source lines: names come from ./symbol.\n",
                interval, 2 * interval);
  out += buf;
  for (std::string c : comments) {
    std::replace(c.begin(), c.end(), '\n', ' ');  // (a program argument might hold one)
    std::replace(c.begin(), c.end(), '\r', ' ');
    out += "# " + c + "\n";
  }
  for (const Line& l : lines) {
    out += '\n';
    out += counts(l);
    const std::vector<uint32_t>& stack = sites.stack(l.row->key.stack);
    for (uint32_t f : stack) {
      std::snprintf(buf, sizeof buf, " %#" PRIx64, FrameAddress(f));
      out += buf;
    }
    out += '\n';
    for (uint32_t f : stack) {
      const agent::Frame& fr = sites.frame(f);
      std::snprintf(buf, sizeof buf, "#\t%#" PRIx64 "\t", FrameAddress(f));
      out += buf;
      out += fr.function + '\t' + fr.file;
      if (fr.line > 0) out += ':' + std::to_string(fr.line);
      out += '\n';
    }
    out += "#\tclass " + sites.string(l.row->key.klass) + ", thread " +
           sites.string(l.row->key.thread) + "\n";
  }
  return out;
}

std::string LookupSymbols(const std::string& query, const agent::SiteTable::Snapshot& sites) {
  // pprof only checks that num_symbols is not 0 (Go's handler says 1 too).
  std::string out = "num_symbols: 1\n";
  for (const std::string& word : agent::Split(query, '+')) {
    // Digits only, as Go's strconv.ParseUint (strtoull would take signs and spaces).
    if (word.empty() || !std::isalnum(static_cast<unsigned char>(word[0]))) continue;
    errno = 0;
    char* rest = nullptr;
    uint64_t address = std::strtoull(word.c_str(), &rest, 0);  // 0x.. or decimal, as Go's
    uint32_t frame;
    if (errno != 0 || rest == word.c_str() || *rest != '\0' ||
        !FrameOfAddress(address, sites.frames.size(), &frame)) {
      continue;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%#" PRIx64 " ", address);
    out += buf + sites.frame(frame).function + "\n";
  }
  return out;
}

}  // namespace heapprof
