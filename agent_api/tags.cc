#include "agent_api/tags.h"

namespace minivm::agent {

void TagMap::CatchUpIndexLocked(gc::Heap& heap) {
  const uint64_t epoch = heap.CollectionCount();
  if (index_epoch_ == epoch) return;
  gc::WeakTable& table = heap.weak_table();
  // Two passes: every moved record's old entry goes before any new one is
  // made, since one record's new address may be another's old one.
  for (uint64_t r : movable_) {
    Record& rec = records_[r];
    if (rec.state != State::kLive || !rec.movable) continue;
    auto it = index_.find(rec.address);
    if (it != index_.end() && it->second == r) index_.erase(it);
  }
  std::vector<uint64_t> still;
  for (uint64_t r : movable_) {
    Record& rec = records_[r];
    if (rec.state != State::kLive || !rec.movable || rec.address == nullptr) {
      rec.listed = false;
      continue;
    }
    gc::Object* now = table.Get(rec.slot);
    rec.address = now;
    if (now == nullptr) {  // died: its ObjectFree is on its way
      rec.movable = false;
      rec.listed = false;
      continue;
    }
    index_[now] = r;
    rec.movable = heap.IsYoung(now);
    rec.listed = rec.movable;
    if (rec.movable) still.push_back(r);
  }
  movable_ = std::move(still);
  index_epoch_ = epoch;
}

std::optional<uint64_t> TagMap::FindLocked(gc::WeakTable& table, const gc::Object* obj) {
  auto it = index_.find(obj);
  if (it == index_.end()) return std::nullopt;
  const Record& rec = records_[it->second];
  // An old object that died keeps its entry until its ObjectFree is handled,
  // and its address may hold another object by now (.index).
  if (rec.state != State::kLive || table.Get(rec.slot) != obj) {
    index_.erase(it);
    return std::nullopt;
  }
  return it->second;
}

int64_t TagMap::Get(gc::Heap& heap, gc::Object* obj) {
  base::MutexLock lock(&mu_);
  CatchUpIndexLocked(heap);
  const std::optional<uint64_t> r = FindLocked(heap.weak_table(), obj);
  return r ? records_[*r].tag : 0;
}

void TagMap::Set(gc::Heap& heap, int env_id, gc::Object* obj, int64_t tag) {
  base::MutexLock lock(&mu_);
  CatchUpIndexLocked(heap);
  SetLocked(heap, env_id, obj, tag);
}

void TagMap::SetAll(gc::Heap& heap, int env_id,
                    const std::vector<std::pair<gc::Object*, int64_t>>& changes) {
  base::MutexLock lock(&mu_);
  CatchUpIndexLocked(heap);
  for (const auto& [obj, tag] : changes) SetLocked(heap, env_id, obj, tag);
}

void TagMap::SetLocked(gc::Heap& heap, int env_id, gc::Object* obj, int64_t tag) {
  gc::WeakTable& table = heap.weak_table();
  if (const std::optional<uint64_t> r = FindLocked(table, obj)) {
    if (tag != 0) {
      records_[*r].tag = tag;
    } else {
      RetireLocked(table, *r, State::kCleared);
      FreeIfDoneLocked(*r);
    }
    return;
  }
  if (tag == 0) return;
  uint64_t r;
  if (!free_.empty()) {
    r = free_.back();
    free_.pop_back();
  } else {
    r = records_.size();
    records_.emplace_back();
  }
  Record& rec = records_[r];
  const bool listed = rec.listed;  // a stale movable_ entry may still name r
  rec = Record{};
  rec.slot = table.Create(obj, TagCookie(env_id, r));
  rec.tag = tag;
  rec.address = obj;
  rec.state = State::kLive;
  rec.movable = heap.IsYoung(obj);
  rec.listed = listed || rec.movable;
  if (rec.movable && !listed) movable_.push_back(r);
  ++held_;
  index_[obj] = r;
}

void TagMap::RetireLocked(gc::WeakTable& table, uint64_t r, State to) {
  Record& rec = records_[r];
  MINIVM_AGENT_DCHECK(rec.state == State::kLive, "retiring record %d twice", r);
  auto it = index_.find(rec.address);
  if (it != index_.end() && it->second == r) index_.erase(it);
  rec.reported = table.Delete(rec.slot);
  rec.state = to;
  rec.movable = false;
}

void TagMap::FreeIfDoneLocked(uint64_t r) {
  Record& rec = records_[r];
  if (rec.state == State::kLive || rec.state == State::kFree || rec.busy ||
      rec.handled != rec.reported || !rec.parked.empty()) {
    return;
  }
  const bool listed = rec.listed;
  rec = Record{};
  rec.listed = listed;
  free_.push_back(r);
  --held_;
}

TagMap::Action TagMap::Begin(const gc::WeakEvent& e, gc::WeakTable& table, int64_t* tag) {
  const uint64_t r = CookieRecord(e.cookie);
  base::MutexLock lock(&mu_);
  // Every event names a held record (.record.reuse); anything else is a
  // forged or corrupt cookie, and is ignored.
  if (r >= records_.size() || records_[r].state == State::kFree) return Action::kParked;
  Record& rec = records_[r];
  if (rec.busy || e.seq != rec.handled) {
    rec.parked.push_back(Parked{e.kind, e.seq});
    return Action::kParked;
  }
  rec.busy = true;
  if (rec.state != State::kLive) return Action::kDrop;  // cleared (.tag.at-delivery)
  if (e.kind == gc::WeakEventKind::kPromoted) {
    if (rec.promoted) return Action::kDrop;
    rec.promoted = true;
    *tag = rec.tag;
    return Action::kPost;
  }
  *tag = rec.tag;
  RetireLocked(table, r, State::kDied);
  return Action::kPost;
}

std::optional<gc::WeakEvent> TagMap::End(const gc::WeakEvent& e) {
  const uint64_t record = CookieRecord(e.cookie);
  base::MutexLock lock(&mu_);
  Record& rec = records_[record];
  MINIVM_AGENT_DCHECK(rec.busy, "End without Begin on record %d", record);
  rec.busy = false;
  ++rec.handled;
  for (size_t i = 0; i < rec.parked.size(); ++i) {
    if (rec.parked[i].seq != rec.handled) continue;
    const Parked next = rec.parked[i];
    rec.parked.erase(rec.parked.begin() + static_cast<ptrdiff_t>(i));
    return gc::WeakEvent{next.kind, rec.slot, e.cookie, nullptr, next.seq};
  }
  FreeIfDoneLocked(record);
  return std::nullopt;
}

absl::flat_hash_map<const gc::Object*, int64_t> TagMap::Snapshot(gc::WeakTable& table) {
  base::MutexLock lock(&mu_);
  absl::flat_hash_map<const gc::Object*, int64_t> out;
  out.reserve(held_);
  for (const Record& rec : records_) {
    if (rec.state != State::kLive) continue;
    if (gc::Object* obj = table.Get(rec.slot); obj != nullptr) out.emplace(obj, rec.tag);
  }
  return out;
}

void TagMap::ForEach(gc::WeakTable& table, absl::FunctionRef<void(gc::Object*, int64_t)> fn) {
  base::MutexLock lock(&mu_);
  for (const Record& rec : records_) {
    if (rec.state != State::kLive) continue;
    if (gc::Object* obj = table.Get(rec.slot); obj != nullptr) fn(obj, rec.tag);
  }
}

void TagMap::ClearAll(gc::WeakTable& table) {
  base::MutexLock lock(&mu_);
  for (uint64_t r = 0; r < records_.size(); ++r) {
    if (records_[r].state != State::kLive) continue;
    RetireLocked(table, r, State::kCleared);
    FreeIfDoneLocked(r);
  }
  // What no held record needs goes now; the records wait for their events.
  index_ = {};
  movable_ = {};
  for (uint64_t r = 0; r < records_.size(); ++r) records_[r].listed = false;
  index_epoch_ = 0;
}

bool TagMap::Empty() {
  base::MutexLock lock(&mu_);
  return held_ == 0;
}

void TagMap::Release() {
  base::MutexLock lock(&mu_);
  MINIVM_AGENT_DCHECK(held_ == 0, "releasing a tag map that holds %d records", held_);
  records_ = {};
  free_ = {};
  index_ = {};
  movable_ = {};
  index_epoch_ = 0;
}

}  // namespace minivm::agent
