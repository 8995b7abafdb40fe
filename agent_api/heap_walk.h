// VMTI heap walking: FollowReferences, IterateThroughHeap, GetObjectsWithTags
// and the names tools print with them (GetFieldName, GetGlobalName,
// GetLocalName). docs/agent-api.md, "Heap walking".
//
// Design:
// .collectors-walk  The walk is the collector's (gc/heap_walker.h): Heap::WalkHeap stops
//    the world and runs it on the calling thread; this file only turns its
//    reports into JVMTI-shaped callbacks, tags and filters.
// .tags  Tags are the environment's TagMap, read once per walk into a map by
//    address (TagMap::Snapshot) when the pause starts; the callback gets a
//    pointer to a copy, a changed value updates that map at once and is
//    written back to the TagMap in one batch (TagMap::SetAll) before the
//    pause ends, while the addresses are still current. One lock per walk
//    rather than two or three per reference: a tagging walk costs a tenth.
//    So GetTag on a held handle, from inside a heap callback, sees the tags
//    as they were when the walk started.
// .callbacks  Callbacks run with the world stopped by their own thread. While one
//    runs, AgentThreadState::heap_callback_depth is set, and every function
//    that would need a safepoint, allocate on the heap or collect returns
//    WRONG_PHASE instead of waiting for itself.
// .filters  As in HotSpot, a reference or object left out by heap_filter or klass
//    is not reported but is still followed.
#ifndef MINIVM_AGENT_API_HEAP_WALK_H_
#define MINIVM_AGENT_API_HEAP_WALK_H_

#include "vmti/vmti.h"

namespace minivm::agent {

vmtiError FollowReferences(vmtiEnv* env, vmtiInt heap_filter, vmtiClass klass,
                           vmtiObject initial_object, const vmtiHeapCallbacks* callbacks,
                           const void* user_data);
vmtiError IterateThroughHeap(vmtiEnv* env, vmtiInt heap_filter, vmtiClass klass,
                             const vmtiHeapCallbacks* callbacks, const void* user_data);
vmtiError GetObjectsWithTags(vmtiEnv* env, vmtiInt tag_count, const vmtiLong* tags,
                             vmtiInt* count_ptr, vmtiObject** object_result_ptr,
                             vmtiLong** tag_result_ptr);
vmtiError GetFieldName(vmtiEnv* env, vmtiClass klass, vmtiInt index, char** name_ptr);
vmtiError GetGlobalName(vmtiEnv* env, vmtiInt index, char** name_ptr);
vmtiError GetLocalName(vmtiEnv* env, vmtiMethodID method, vmtiInt slot, char** name_ptr);

}  // namespace minivm::agent

#endif  // MINIVM_AGENT_API_HEAP_WALK_H_
