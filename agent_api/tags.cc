#include "agent_api/tags.h"

namespace minivm::agent {

void TagMap::RebuildIndexLocked(gc::WeakTable& table, uint64_t epoch) {
  if (index_epoch_ == epoch) return;
  index_.clear();
  for (uint64_t r = 0; r < records_.size(); ++r) {
    if (!records_[r].in_use) continue;
    if (gc::Object* obj = table.Get(records_[r].slot); obj != nullptr) index_[obj] = r;
  }
  index_epoch_ = epoch;
}

int64_t TagMap::Get(gc::WeakTable& table, uint64_t epoch, gc::Object* obj) {
  gc::MutexLock lock(&mu_);
  RebuildIndexLocked(table, epoch);
  auto it = index_.find(obj);
  return it == index_.end() ? 0 : records_[it->second].tag;
}

void TagMap::Set(gc::WeakTable& table, uint64_t epoch, int env_id, gc::Object* obj,
                 int64_t tag) {
  gc::MutexLock lock(&mu_);
  RebuildIndexLocked(table, epoch);
  SetLocked(table, env_id, obj, tag);
}

absl::flat_hash_map<const gc::Object*, int64_t> TagMap::Snapshot(gc::WeakTable& table,
                                                                 uint64_t epoch) {
  gc::MutexLock lock(&mu_);
  RebuildIndexLocked(table, epoch);
  absl::flat_hash_map<const gc::Object*, int64_t> out;
  out.reserve(index_.size());
  for (const auto& [obj, record] : index_) out.emplace(obj, records_[record].tag);
  return out;
}

void TagMap::SetAll(gc::WeakTable& table, uint64_t epoch, int env_id,
                    const std::vector<std::pair<gc::Object*, int64_t>>& changes) {
  gc::MutexLock lock(&mu_);
  RebuildIndexLocked(table, epoch);
  for (const auto& [obj, tag] : changes) SetLocked(table, env_id, obj, tag);
}

void TagMap::SetLocked(gc::WeakTable& table, int env_id, gc::Object* obj, int64_t tag) {
  auto it = index_.find(obj);
  if (it != index_.end()) {
    Record& rec = records_[it->second];
    if (tag != 0) {
      rec.tag = tag;
      return;
    }
    table.Delete(rec.slot);
    rec = Record{};
    free_.push_back(it->second);
    index_.erase(it);
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
  rec.slot = table.Create(obj, TagCookie(env_id, r));
  rec.tag = tag;
  rec.in_use = true;
  rec.promoted = false;
  index_[obj] = r;
}

std::optional<int64_t> TagMap::OnPromoted(uint64_t record) {
  gc::MutexLock lock(&mu_);
  if (record >= records_.size() || !records_[record].in_use || records_[record].promoted) {
    return std::nullopt;
  }
  records_[record].promoted = true;
  return records_[record].tag;
}

std::optional<int64_t> TagMap::OnDied(gc::WeakTable& table, uint64_t record) {
  gc::MutexLock lock(&mu_);
  if (record >= records_.size() || !records_[record].in_use) return std::nullopt;
  Record& rec = records_[record];
  const int64_t tag = rec.tag;
  table.Delete(rec.slot);
  rec = Record{};
  free_.push_back(record);
  // The index may still map a stale address to this record; it is rebuilt
  // after every collection, and this record died in the latest one.
  index_epoch_ = ~uint64_t{0};
  return tag;
}

void TagMap::ForEach(gc::WeakTable& table, absl::FunctionRef<void(gc::Object*, int64_t)> fn) {
  gc::MutexLock lock(&mu_);
  for (const Record& rec : records_) {
    if (!rec.in_use) continue;
    if (gc::Object* obj = table.Get(rec.slot); obj != nullptr) fn(obj, rec.tag);
  }
}

}  // namespace minivm::agent
