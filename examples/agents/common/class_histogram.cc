#include "class_histogram.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "retention.h"

namespace agent {
namespace {

struct Counts {
  std::map<vmtiClass, ClassCount> by_class;
};

vmtiInt CountObject(vmtiClass klass, vmtiLong size, vmtiLong*, vmtiInt, void* user_data) {
  ClassCount& c = static_cast<Counts*>(user_data)->by_class[klass];
  c.instances++;
  c.bytes += size;
  return 0;
}

}  // namespace

ClassHistogram TakeClassHistogram(vmtiEnv* env) {
  ClassHistogram h;
  if ((*env)->IterateThroughHeap == nullptr) {
    h.error = "this VM has no heap walking";
    return h;
  }
  Counts counts;
  vmtiHeapCallbacks callbacks;
  std::memset(&callbacks, 0, sizeof callbacks);
  callbacks.heap_iteration_callback = &CountObject;
  vmtiLong t0 = 0, t1 = 0;
  (*env)->GetTime(env, &t0);
  const vmtiError err = (*env)->IterateThroughHeap(env, 0, nullptr, &callbacks, &counts);
  (*env)->GetTime(env, &t1);
  h.pause_ms = static_cast<double>(t1 - t0) / 1e6;
  if (err != VMTI_ERROR_NONE) {
    h.error = "IterateThroughHeap failed (error " + std::to_string(err) + ")";
    return h;
  }
  for (auto& [klass, c] : counts.by_class) {
    char* sig = nullptr;
    if ((*env)->GetClassSignature(env, klass, &sig, nullptr) == VMTI_ERROR_NONE && sig != nullptr) {
      c.name = sig;
      (*env)->Deallocate(env, reinterpret_cast<unsigned char*>(sig));
    } else {
      c.name = "?";
    }
    h.instances += c.instances;
    h.bytes += c.bytes;
    h.rows.push_back(c);
  }
  std::sort(h.rows.begin(), h.rows.end(), [](const ClassCount& a, const ClassCount& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name;
  });
  return h;
}

std::string FormatClassHistogram(const ClassHistogram& h, const std::string& prefix, int top) {
  if (!h.error.empty()) return prefix + "class histogram: none (" + h.error + ")\n";
  char line[512];
  std::snprintf(line, sizeof line,
                "%sclass histogram (live objects, exact: every object reachable from the roots; "
                "a heap walk of %.1f ms):\n",
                prefix.c_str(), h.pause_ms);
  std::string out = line;
  std::snprintf(line, sizeof line, "%s%5s %14s %16s  %s\n", prefix.c_str(), "#", "instances",
                "bytes", "class");
  out += line;
  size_t shown = 0;
  for (const ClassCount& c : h.rows) {
    if (top > 0 && shown == static_cast<size_t>(top)) break;
    ++shown;
    std::snprintf(line, sizeof line, "%s%4zu: %14s %16s  %s\n", prefix.c_str(), shown,
                  WithCommas(c.instances).c_str(), WithCommas(c.bytes).c_str(), c.name.c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "%s%5s %14s %16s  (%zu classes)\n", prefix.c_str(), "Total",
                WithCommas(h.instances).c_str(), WithCommas(h.bytes).c_str(), h.rows.size());
  out += line;
  return out;
}

}  // namespace agent
