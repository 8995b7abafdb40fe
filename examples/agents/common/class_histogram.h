// A class histogram of the live heap (jmap -histo:live), exact: every
// object reachable from the roots counted once, by one VMTI
// IterateThroughHeap (docs/heap-walking.md). The walk is a pause of the
// program, logged by the VM with --verbose:gc.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_CLASS_HISTOGRAM_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_CLASS_HISTOGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "vmti/vmti.h"

namespace agent {

struct ClassCount {
  std::string name;
  int64_t instances = 0;
  int64_t bytes = 0;
};

struct ClassHistogram {
  std::vector<ClassCount> rows;  // most bytes first, then by name
  int64_t instances = 0, bytes = 0;
  double pause_ms = 0;
  std::string error;  // empty, or why there is no histogram
};

// Needs can_tag_objects; call from a callback or an agent thread, not from
// a heap callback.
ClassHistogram TakeClassHistogram(vmtiEnv* env);

// jmap's layout: "  #  instances  bytes  class" rows under a title, each
// line prefixed with `prefix` ("heapprof: "); at most `top` rows (0: all),
// then the totals.
std::string FormatClassHistogram(const ClassHistogram& h, const std::string& prefix, int top);

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_CLASS_HISTOGRAM_H_
