#include "gc/weak_table.h"

#include <algorithm>

#include "gc/check.h"

namespace minivm::gc {

WeakSlotId WeakTable::Create(Object* obj, uint64_t cookie) {
  base::MutexLock lock(&mu_);
  WeakSlotId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<WeakSlotId>(slots_.size());
    slots_.emplace_back();
  }
  const bool listed = slots_[id].listed_young;
  slots_[id] = Slot{obj, cookie, 0, true, true};
  if (!listed) young_.push_back(id);
  ++live_;
  return id;
}

Object* WeakTable::Get(WeakSlotId id) const {
  base::MutexLock lock(&mu_);
  MINIVM_GC_CHECK(id < slots_.size() && slots_[id].in_use, "weak slot %d is not in use", id);
  return slots_[id].obj;
}

uint64_t WeakTable::Cookie(WeakSlotId id) const {
  base::MutexLock lock(&mu_);
  MINIVM_GC_CHECK(id < slots_.size() && slots_[id].in_use, "weak slot %d is not in use", id);
  return slots_[id].cookie;
}

uint32_t WeakTable::Delete(WeakSlotId id) {
  base::MutexLock lock(&mu_);
  MINIVM_GC_CHECK(id < slots_.size() && slots_[id].in_use, "weak slot %d deleted twice", id);
  const uint32_t reported = slots_[id].reported;
  slots_[id] = Slot{.listed_young = slots_[id].listed_young};
  free_.push_back(id);
  --live_;
  return reported;
}

WeakTable::Lookup WeakTable::Find(WeakSlotId id, uint64_t cookie) const {
  base::MutexLock lock(&mu_);
  if (id >= slots_.size() || !slots_[id].in_use || slots_[id].cookie != cookie) {
    return Lookup::kAbsent;
  }
  return slots_[id].obj == nullptr ? Lookup::kDied : Lookup::kLive;
}

bool WeakTable::TryDelete(WeakSlotId id, uint64_t cookie) {
  base::MutexLock lock(&mu_);
  if (id >= slots_.size() || !slots_[id].in_use || slots_[id].cookie != cookie) return false;
  slots_[id] = Slot{.listed_young = slots_[id].listed_young};
  free_.push_back(id);
  --live_;
  return true;
}

size_t WeakTable::size() const {
  base::MutexLock lock(&mu_);
  return live_;
}

bool WeakTable::Apply(WeakSlotId id, FateFn fate, std::vector<WeakEvent>* events,
                      WeakEventKind* kind) {
  Slot& s = slots_[id];
  Fate f{};
  if (!fate(s.obj, &f)) return false;
  *kind = f.kind;
  s.obj = f.kind == WeakEventKind::kDied ? nullptr : f.new_address;
  if (events != nullptr) {
    const uint32_t seq = f.kind == WeakEventKind::kMoved ? 0 : s.reported++;
    events->push_back(WeakEvent{f.kind, id, s.cookie, s.obj, seq});
  }
  return true;
}

void WeakTable::Process(Scope scope, FateFn fate, std::vector<WeakEvent>* events) {
  base::MutexLock lock(&mu_);
  WeakEventKind kind;
  if (scope == Scope::kAll) {
    for (WeakSlotId id = 0; id < slots_.size(); ++id) {
      if (slots_[id].in_use && slots_[id].obj != nullptr) Apply(id, fate, events, &kind);
    }
    return;
  }
  std::sort(young_.begin(), young_.end());
  size_t kept = 0;
  for (const WeakSlotId id : young_) {
    Slot& s = slots_[id];
    const bool still_young = s.in_use && s.obj != nullptr && Apply(id, fate, events, &kind) &&
                             kind == WeakEventKind::kMoved;
    if (still_young) {
      young_[kept++] = id;
    } else {
      s.listed_young = false;
    }
  }
  young_.resize(kept);
}

void WeakTable::ForEach(absl::FunctionRef<void(Object*)> fn) const {
  base::MutexLock lock(&mu_);
  for (const Slot& s : slots_) {
    if (s.in_use && s.obj != nullptr) fn(s.obj);
  }
}

}  // namespace minivm::gc
