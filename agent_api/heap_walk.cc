#include "agent_api/heap_walk.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "agent_api/environment.h"
#include "agent_api/functions.h"
#include "agent_api/tool_interface.h"
#include "gc/heap.h"
#include "gc/heap_walker.h"
#include "vm/runtime/thread.h"
#include "vm/runtime/vm.h"

namespace minivm::agent {
namespace {

constexpr unsigned kLive = VMTI_PHASE_LIVE;
constexpr vmtiInt kKnownFilters = VMTI_HEAP_FILTER_TAGGED | VMTI_HEAP_FILTER_UNTAGGED;

#define VMTI_ENTER_LIVE(env)                                                            \
  Environment* e = nullptr;                                                             \
  if (vmtiError err_ = EnterFunction(env, kLive, false, &e); err_ != VMTI_ERROR_NONE) { \
    return err_;                                                                        \
  }

vmtiError NeedTagging(Environment* e) {
  if (!e->Capabilities().can_tag_objects) return VMTI_ERROR_MUST_POSSESS_CAPABILITY;
  return VMTI_ERROR_NONE;
}

// Marks the extent of one heap callback (heap_walk.h .callbacks).
class HeapCallbackScope {
 public:
  HeapCallbackScope() : ts_(CurrentAgentThreadState()) { ++ts_.heap_callback_depth; }
  ~HeapCallbackScope() { --ts_.heap_callback_depth; }
  HeapCallbackScope(const HeapCallbackScope&) = delete;
  HeapCallbackScope& operator=(const HeapCallbackScope&) = delete;

 private:
  AgentThreadState& ts_;
};

vmtiClass ClassOf(const gc::Object* o) {
  return reinterpret_cast<vmtiClass>(const_cast<gc::ClassLayout*>(o->klass));
}

// JVMTI's `length`: elements of an Array, bytes of Bytes and String, -1.
vmtiInt LengthOf(const gc::Object* o) {
  switch (o->klass->kind) {
    case gc::LayoutKind::kRefArray:
    case gc::LayoutKind::kByteArray:
      return static_cast<vmtiInt>(o->length());
    case gc::LayoutKind::kFields:
      break;
  }
  return -1;
}

// What every walk shares: the environment's tags and the filters.
class TaggedWalk : public gc::HeapWalkVisitor {
 public:
  TaggedWalk(Environment* e, vmtiInt heap_filter, const gc::ClassLayout* klass,
             const vmtiHeapCallbacks& callbacks, void* user_data)
      : e_(e),
        filter_(heap_filter),
        klass_(klass),
        callbacks_(callbacks),
        user_data_(user_data),
        table_(e->tool->weak_table()) {}

  // Inside the pause (heap_walk.h .tags): the tags by current address, read
  // once, and the callbacks' changes written back once.
  void OnWalkStart() override {
    tags_ = e_->tags.Snapshot(table_);
  }
  void OnWalkEnd() override {
    if (!changes_.empty()) e_->tags.SetAll(*e_->tool->vm()->heap(), e_->id, changes_);
  }

 protected:
  int64_t TagOf(gc::Object* o) const {
    auto it = tags_.find(o);
    return it == tags_.end() ? 0 : it->second;
  }
  void SetTag(gc::Object* o, int64_t old_tag, int64_t new_tag) {
    if (new_tag == old_tag) return;
    if (new_tag == 0) {
      tags_.erase(o);
    } else {
      tags_[o] = new_tag;
    }
    changes_.emplace_back(o, new_tag);
  }
  // Left out of the reports by heap_filter or klass.
  bool Filtered(const gc::Object* o, int64_t tag) const {
    if (klass_ != nullptr && o->klass != klass_) return true;
    if ((filter_ & VMTI_HEAP_FILTER_TAGGED) != 0 && tag != 0) return true;
    if ((filter_ & VMTI_HEAP_FILTER_UNTAGGED) != 0 && tag == 0) return true;
    return false;
  }
  static Action ActionFor(vmtiInt r) {
    if ((r & VMTI_VISIT_ABORT) != 0) return Action::kAbort;
    return (r & VMTI_VISIT_OBJECTS) != 0 ? Action::kFollow : Action::kSkip;
  }

  Environment* const e_;
  const vmtiInt filter_;
  const gc::ClassLayout* const klass_;
  const vmtiHeapCallbacks callbacks_;
  void* const user_data_;
  gc::WeakTable& table_;
  absl::flat_hash_map<const gc::Object*, int64_t> tags_;
  std::vector<std::pair<gc::Object*, int64_t>> changes_;
};

class ReferenceWalk final : public TaggedWalk {
 public:
  using TaggedWalk::TaggedWalk;

  Action OnRoot(const gc::RootInfo& root, gc::Object* obj) override {
    vmtiHeapReferenceInfo info;
    std::memset(&info, 0, sizeof info);
    vmtiHeapReferenceKind kind = VMTI_HEAP_REFERENCE_OTHER;
    switch (root.kind) {
      case gc::RootKind::kGlobal:
        kind = VMTI_HEAP_REFERENCE_GLOBAL;
        info.global.index = static_cast<vmtiInt>(root.index);
        break;
      case gc::RootKind::kStackSlot:
        kind = VMTI_HEAP_REFERENCE_STACK_LOCAL;
        info.stack_local.thread = reinterpret_cast<vmtiThread>(const_cast<void*>(root.thread));
        info.stack_local.depth = root.depth;
        info.stack_local.method = MethodIdOf(static_cast<const Function*>(root.method));
        info.stack_local.location = root.location;
        info.stack_local.slot = root.slot;
        break;
      case gc::RootKind::kOther:
        break;
    }
    return Report(kind, info, nullptr, obj);
  }

  Action OnReference(gc::Object* referrer, uint32_t index, gc::Object* referee) override {
    vmtiHeapReferenceInfo info;
    std::memset(&info, 0, sizeof info);
    vmtiHeapReferenceKind kind;
    if (referrer->klass->kind == gc::LayoutKind::kRefArray) {
      kind = VMTI_HEAP_REFERENCE_ARRAY_ELEMENT;
      info.array.index = static_cast<vmtiInt>(index);
    } else {
      kind = VMTI_HEAP_REFERENCE_FIELD;
      info.field.index = static_cast<vmtiInt>(index);
    }
    return Report(kind, info, referrer, referee);
  }

 private:
  Action Report(vmtiHeapReferenceKind kind, const vmtiHeapReferenceInfo& info, gc::Object* referrer,
                gc::Object* obj) {
    const int64_t tag = TagOf(obj);
    if (Filtered(obj, tag)) return Action::kFollow;  // heap_walk.h .filters
    vmtiLong new_tag = tag;
    const int64_t referrer_tag = referrer != nullptr ? TagOf(referrer) : 0;
    vmtiLong new_referrer_tag = referrer_tag;
    // A self-reference gets one tag pointer for both, as in JVMTI.
    vmtiLong* referrer_tag_ptr =
        referrer == nullptr ? nullptr : (referrer == obj ? &new_tag : &new_referrer_tag);
    vmtiInt r;
    {
      HeapCallbackScope scope;
      r = callbacks_.heap_reference_callback(kind, &info, ClassOf(obj),
                                             referrer != nullptr ? ClassOf(referrer) : nullptr,
                                             static_cast<vmtiLong>(obj->Size()), &new_tag,
                                             referrer_tag_ptr, LengthOf(obj), user_data_);
    }
    SetTag(obj, tag, new_tag);
    if (referrer != nullptr && referrer != obj) SetTag(referrer, referrer_tag, new_referrer_tag);
    return ActionFor(r);
  }
};

// IterateThroughHeap: follows everything, reports each object once.
class IterationWalk final : public TaggedWalk {
 public:
  using TaggedWalk::TaggedWalk;

  Action OnRoot(const gc::RootInfo&, gc::Object*) override { return Action::kFollow; }
  Action OnReference(gc::Object*, uint32_t, gc::Object*) override { return Action::kFollow; }
  Action OnFirstVisit(gc::Object* obj) override {
    const int64_t tag = TagOf(obj);
    if (Filtered(obj, tag)) return Action::kFollow;
    vmtiLong new_tag = tag;
    vmtiInt r;
    {
      HeapCallbackScope scope;
      r = callbacks_.heap_iteration_callback(ClassOf(obj), static_cast<vmtiLong>(obj->Size()),
                                             &new_tag, LengthOf(obj), user_data_);
    }
    SetTag(obj, tag, new_tag);
    return (r & VMTI_VISIT_ABORT) != 0 ? Action::kAbort : Action::kFollow;
  }
};

// The checks both walks share, in the order functions.cc documents.
vmtiError CheckWalk(Environment* e, vmtiInt heap_filter, vmtiClass klass,
                    const vmtiHeapCallbacks* callbacks, const gc::ClassLayout** klass_out) {
  if (CurrentAgentThreadState().heap_callback_depth > 0) return VMTI_ERROR_WRONG_PHASE;
  if (vmtiError err = NeedTagging(e); err != VMTI_ERROR_NONE) return err;
  if (callbacks == nullptr) return VMTI_ERROR_NULL_POINTER;
  if ((heap_filter & ~kKnownFilters) != 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  *klass_out = nullptr;
  if (klass != nullptr) {
    const Klass* k = e->tool->vm()->FindClass(klass);
    if (k == nullptr) return VMTI_ERROR_INVALID_CLASS;
    *klass_out = k;
  }
  return VMTI_ERROR_NONE;
}

// The slot a vmtiObject handle names, or null.
const gc::Value* HandleSlot(vmtiObject handle) {
  const AgentThreadState& ts = CurrentAgentThreadState();
  const auto token = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
  for (const AgentThreadState::Handle& h : ts.handles) {
    if (h.token == token) return h.slot;
  }
  for (const auto& b : ts.held) {
    if (token - b->first_token < b->slots.size()) return &b->slots[token - b->first_token];
  }
  return nullptr;
}

}  // namespace

vmtiError FollowReferences(vmtiEnv* env, vmtiInt heap_filter, vmtiClass klass,
                           vmtiObject initial_object, const vmtiHeapCallbacks* callbacks,
                           const void* user_data) {
  VMTI_ENTER_LIVE(env);
  const gc::ClassLayout* layout = nullptr;
  if (vmtiError err = CheckWalk(e, heap_filter, klass, callbacks, &layout);
      err != VMTI_ERROR_NONE) {
    return err;
  }
  if (callbacks->heap_reference_callback == nullptr) return VMTI_ERROR_NULL_POINTER;
  const gc::Value* start = nullptr;
  if (initial_object != nullptr) {
    start = HandleSlot(initial_object);
    if (start == nullptr || !start->IsRef()) return VMTI_ERROR_INVALID_OBJECT;
  }
  ReferenceWalk walk(e, heap_filter, layout, *callbacks, const_cast<void*>(user_data));
  if (!e->tool->vm()->heap()->WalkHeap(RequesterMutator(), start, walk)) {
    return VMTI_ERROR_WRONG_PHASE;  // the VM is dying
  }
  return VMTI_ERROR_NONE;
}

vmtiError IterateThroughHeap(vmtiEnv* env, vmtiInt heap_filter, vmtiClass klass,
                             const vmtiHeapCallbacks* callbacks, const void* user_data) {
  VMTI_ENTER_LIVE(env);
  const gc::ClassLayout* layout = nullptr;
  if (vmtiError err = CheckWalk(e, heap_filter, klass, callbacks, &layout);
      err != VMTI_ERROR_NONE) {
    return err;
  }
  if (callbacks->heap_iteration_callback == nullptr) return VMTI_ERROR_NULL_POINTER;
  IterationWalk walk(e, heap_filter, layout, *callbacks, const_cast<void*>(user_data));
  if (!e->tool->vm()->heap()->WalkHeap(RequesterMutator(), nullptr, walk)) {
    return VMTI_ERROR_WRONG_PHASE;
  }
  return VMTI_ERROR_NONE;
}

vmtiError GetObjectsWithTags(vmtiEnv* env, vmtiInt tag_count, const vmtiLong* tags,
                             vmtiInt* count_ptr, vmtiObject** object_result_ptr,
                             vmtiLong** tag_result_ptr) {
  VMTI_ENTER_LIVE(env);
  if (CurrentAgentThreadState().heap_callback_depth > 0) return VMTI_ERROR_WRONG_PHASE;
  if (vmtiError err = NeedTagging(e); err != VMTI_ERROR_NONE) return err;
  if (tag_count < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  if (tags == nullptr || count_ptr == nullptr) return VMTI_ERROR_NULL_POINTER;
  absl::flat_hash_set<int64_t> wanted;
  for (vmtiInt i = 0; i < tag_count; ++i) {
    if (tags[i] == 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;  // 0 is "untagged"
    wanted.insert(tags[i]);
  }
  AgentThreadState& ts = CurrentAgentThreadState();
  auto batch = std::make_unique<AgentThreadState::HeldBatch>();
  batch->callback_depth = ts.callback_depth;
  std::vector<int64_t> found_tags;
  // With the world stopped, so the addresses read from the weak slots are
  // current until the batch, a root, holds them.
  bool gathered = false;
  auto gather = [&] {
    if (gathered) return;
    gathered = true;
    e->tags.ForEach(e->tool->weak_table(), [&](gc::Object* obj, int64_t tag) {
      if (!wanted.contains(tag)) return;
      batch->slots.push_back(gc::Value::Ref(obj));
      found_tags.push_back(tag);
    });
    RegisterHeldBatch(batch.get());
  };
  e->tool->vm()->heap()->RunAtSafepoint(RequesterMutator(), [&](gc::Mutator*) { gather(); });
  if (!gathered) return VMTI_ERROR_WRONG_PHASE;  // no mutator left: the VM is ending
  const size_t n = batch->slots.size();
  batch->first_token = ToolInterface::NewHandleTokens(n == 0 ? 1 : n);
  const uint64_t first = batch->first_token;
  vmtiObject* objects = nullptr;
  vmtiLong* out_tags = nullptr;
  if (object_result_ptr != nullptr) {
    objects = static_cast<vmtiObject*>(std::malloc(sizeof(vmtiObject) * (n == 0 ? 1 : n)));
  }
  if (tag_result_ptr != nullptr) {
    out_tags = static_cast<vmtiLong*>(std::malloc(sizeof(vmtiLong) * (n == 0 ? 1 : n)));
  }
  if ((object_result_ptr != nullptr && objects == nullptr) ||
      (tag_result_ptr != nullptr && out_tags == nullptr)) {
    std::free(objects);
    std::free(out_tags);
    UnregisterHeldBatch(batch.get());
    return VMTI_ERROR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < n; ++i) {
    if (objects != nullptr)
      objects[i] = reinterpret_cast<vmtiObject>(static_cast<uintptr_t>(first + i));
    if (out_tags != nullptr) out_tags[i] = found_tags[i];
  }
  if (object_result_ptr == nullptr || n == 0) {
    UnregisterHeldBatch(batch.get());  // no handle escapes: nothing to hold
  } else {
    ts.held.push_back(std::move(batch));
  }
  *count_ptr = static_cast<vmtiInt>(n);
  if (object_result_ptr != nullptr) *object_result_ptr = objects;
  if (tag_result_ptr != nullptr) *tag_result_ptr = out_tags;
  return VMTI_ERROR_NONE;
}

vmtiError GetFieldName(vmtiEnv* env, vmtiClass klass, vmtiInt index, char** name_ptr) {
  VMTI_ENTER_LIVE(env);
  if (vmtiError err = NeedTagging(e); err != VMTI_ERROR_NONE) return err;
  const Klass* k = e->tool->vm()->FindClass(klass);
  if (k == nullptr) return VMTI_ERROR_INVALID_CLASS;
  if (name_ptr == nullptr) return VMTI_ERROR_NULL_POINTER;
  if (k->kind != gc::LayoutKind::kFields || index < 0 ||
      static_cast<uint32_t>(index) >= k->field_count) {
    return VMTI_ERROR_ILLEGAL_ARGUMENT;
  }
  // Built-in classes with hidden fields (Thread) keep no names.
  if (static_cast<size_t>(index) >= k->field_symbols.size()) return VMTI_ERROR_NOT_AVAILABLE;
  return CopyApiString(e->tool->vm()->program().symbols.Name(k->field_symbols[index]), name_ptr);
}

vmtiError GetGlobalName(vmtiEnv* env, vmtiInt index, char** name_ptr) {
  VMTI_ENTER_LIVE(env);
  if (vmtiError err = NeedTagging(e); err != VMTI_ERROR_NONE) return err;
  if (name_ptr == nullptr) return VMTI_ERROR_NULL_POINTER;
  const std::vector<std::string>& names = e->tool->vm()->program().global_names;
  if (index < 0 || static_cast<size_t>(index) >= names.size()) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  return CopyApiString(names[index], name_ptr);
}

vmtiError GetLocalName(vmtiEnv* env, vmtiMethodID method, vmtiInt slot, char** name_ptr) {
  VMTI_ENTER_LIVE(env);
  if (vmtiError err = NeedTagging(e); err != VMTI_ERROR_NONE) return err;
  const Function* fn = ResolveMethodId(e, method);
  if (fn == nullptr) return VMTI_ERROR_INVALID_METHODID;
  if (name_ptr == nullptr) return VMTI_ERROR_NULL_POINTER;
  if (slot < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  // Operand-stack slots (at and above num_locals) have no names.
  if (static_cast<size_t>(slot) >= fn->local_names.size() || fn->local_names[slot].empty()) {
    return VMTI_ERROR_NOT_AVAILABLE;
  }
  return CopyApiString(fn->local_names[slot], name_ptr);
}

}  // namespace minivm::agent
