#include "agent_api/thread_states.h"

#include "agent_api/tool_interface.h"
#include "gc/heap.h"
#include "vm/runtime/thread.h"

namespace minivm::agent {
namespace {

// The calling thread's mutator when it is a VM thread attached to the heap.
gc::Mutator* AttachedMutator() {
  VMThread* t = CurrentAgentThreadState().thread;
  if (t == nullptr || t->mutator.gc_private == nullptr) return nullptr;
  return &t->mutator;
}

}  // namespace

SafepointStateScope::SafepointStateScope(gc::SafepointState to) : m_(AttachedMutator()) {
  if (m_ != nullptr) saved_ = m_->heap->SetSafepointState(m_, to);
}

SafepointStateScope::~SafepointStateScope() {
  if (m_ != nullptr) m_->heap->SetSafepointState(m_, saved_);
}

ObjectAccessScope::ObjectAccessScope(gc::Heap* heap) {
  if (AttachedMutator() != nullptr || heap->SafepointOwnedByCallingThread()) return;
  ok_ = heap->StopWorld();
  if (ok_) stopped_ = heap;
}

ObjectAccessScope::~ObjectAccessScope() {
  if (stopped_ != nullptr) stopped_->ResumeWorld();
}

bool InVmState() {
  gc::Mutator* m = AttachedMutator();
  return m == nullptr || gc::SafepointManager::StateOfSelf(m) == gc::SafepointState::kRunning;
}

}  // namespace minivm::agent
