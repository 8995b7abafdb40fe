// Paths to GC roots ("why is it still alive"), found with VMTI's
// FollowReferences: leakcheck's "retained by" lines and heapprof's
// retention labels.
//
// Design:
// .bfs  One breadth-first walk from the roots (the VM's walk is breadth-first,
//    docs/heap-walking.md), so the first time the walk reaches an object of
//    a query it is on a shortest path from a root to that query's objects.
// .scratch-tags  Objects are named by tags in a scratch environment of the agent's own
//    (walk_env), never in the environment whose tags identify samples:
//    targets get tag -(query + 1), every object the walk reaches gets its
//    node number (> 0), and the node table keeps, per node, its parent
//    node and the reference that reached it, so a path is read backwards
//    from the target. After the walk, a second walk that follows only
//    tagged objects removes every scratch tag (the tagged objects are
//    closed under "parent", so it reaches them all), and the targets'
//    tags are cleared through their handles.
// .budget  The budget: at most max_objects nodes (about 40 bytes each here, plus
//    the VM's tag for each) and max_seconds of walking; beyond either the
//    walk is aborted and the queries not yet answered are reported as cut
//    off. The walk also stops as soon as every query is answered.
// .targets  The targets' handles (from GetObjectsWithTags) are roots of kind
//    OTHER while the search runs; a root reference of that kind to a
//    target is skipped, so a target is found only through what really
//    keeps it alive (and a dead, not yet collected one is "unreachable").
// .calling-thread  Everything runs on the calling thread; the walks are pauses of the VM
//    (logged by --verbose:gc), and the report states their total.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_RETENTION_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_RETENTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "vmti/vmti.h"

namespace agent {

struct RetentionBudget {
  int64_t max_objects = 2000000;
  double max_seconds = 2.0;
};

// One path, as links from the root to the target.
struct RetentionPath {
  enum class Status { kFound, kCutOff, kUnreachable, kNoObjects };
  Status status = Status::kNoObjects;
  std::string root_kind;           // "global", "local", "other"
  std::vector<std::string> links;  // root first, then one per reference; the
                                   // last names the target's class
  // "global cache -> Cache.buckets -> Array[12] -> Entry.next x 3 -> Entry",
  // repeated links folded; or why there is none.
  std::string Text() const;
  // The root and the first `links` references, element indexes dropped
  // ("global cache -> Cache.buckets -> Array[]"), for grouping: a pprof
  // label. Empty unless found.
  std::string Prefix(size_t links) const;
};

struct RetentionResult {
  std::vector<RetentionPath> paths;  // one per query
  int64_t visited = 0;               // objects the search walk reached
  double pause_ms = 0;               // both walks and the tag lookup
  bool cut_off = false;
  std::string error;  // a VMTI call failed (then paths are kNoObjects)
  // The VM's function table has no heap walking (a VMTI host without the
  // second edition's slots, such as the tools tests' fake VM): no search.
  bool unsupported = false;
};

// Finds, for each query (tags of tag_env), the shortest path from a GC root
// to one of the live objects carrying those tags. Call from a callback or
// an agent's own thread, not from inside a heap callback. walk_env: an
// environment of this agent with can_tag_objects whose tags it uses for
// nothing else.
RetentionResult FindRetentionPaths(vmtiEnv* tag_env, vmtiEnv* walk_env,
                                   const std::vector<std::vector<vmtiLong>>& queries,
                                   const RetentionBudget& budget);

// The scratch environment FindRetentionPaths needs: a new environment of
// `vm` with can_tag_objects; null after one line on stderr.
vmtiEnv* NewWalkEnvironment(vmtiVM* vm, const char* agent);

// "66,531": thousands separators, for folded links.
std::string WithCommas(int64_t n);

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_RETENTION_H_
