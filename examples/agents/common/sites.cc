#include "sites.h"

#include <cstdio>
#include <cstring>

namespace agent {
namespace {

// The id of `key` in `index`; a new key gets the next id, with `value`
// appended to `store` under it. The caller holds the table's lock.
template <typename Store, typename Value>
uint32_t InternLocked(std::unordered_map<std::string, uint32_t>* index, Store* store,
                      std::string key, const Value& value) {
  auto it = index->find(key);
  if (it != index->end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(store->size());
  store->push_back(value);
  index->emplace(std::move(key), id);
  return id;
}

}  // namespace

std::string TakeString(vmtiEnv* env, char* s) {
  if (s == nullptr) return std::string();
  std::string r(s);
  (*env)->Deallocate(env, reinterpret_cast<unsigned char*>(s));
  return r;
}

std::string FrameLabel(const Frame& f) {
  std::string s = f.function;
  if (!f.file.empty()) {
    s += ' ';
    s += f.file;
    if (f.line > 0) s += ":" + std::to_string(f.line);
  }
  return s;
}

bool SiteTable::Capture(vmtiEnv* env, vmtiObject object, vmtiClass klass, int64_t max_depth,
                        std::atomic<int64_t>* next_tag, ErrorLog* log, Sample* out) {
  if (!log->Check(env, (*env)->GetSampleInfo(env, &out->info), "GetSampleInfo")) return false;
  out->stack = CaptureStack(env, static_cast<int>(max_depth), log);
  out->klass = ClassName(env, klass, log);
  out->tag = next_tag->fetch_add(1, std::memory_order_relaxed);
  if (!log->Check(env, (*env)->SetTag(env, object, out->tag), "SetTag")) out->tag = 0;
  return true;
}

uint32_t SiteIds::Get(uint32_t frame, uint32_t klass, bool* added) {
  const uint64_t key = static_cast<uint64_t>(frame) << 32 | klass;
  const auto [it, inserted] = ids_.emplace(key, static_cast<uint32_t>(ids_.size()));
  *added = inserted;
  return it->second;
}

SiteTable::SiteTable() {
  Frame unknown;
  unknown.function = "<unknown>";
  InternFrameLocked(unknown);
  stacks_.push_back({0});
  stack_index_[std::string(reinterpret_cast<const char*>(stacks_[0].data()), 4)] = 0;
  strings_.push_back("<unknown>");
  string_index_["<unknown>"] = 0;
}

uint32_t SiteTable::InternFrameLocked(const Frame& f) {
  std::string key = f.function;
  key.push_back('\0');
  key += f.file;
  key.push_back('\0');
  key += std::to_string(f.line);
  return InternLocked(&frame_index_, &frames_, std::move(key), f);
}

uint32_t SiteTable::ResolveFrame(vmtiEnv* env, const vmtiFrameInfo& fi, ErrorLog* log) {
  MethodLoc ml{fi.method, fi.location};
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = by_location_.find(ml);
    if (it != by_location_.end()) return it->second;
  }
  // Resolve outside the lock: these calls enter the VM.
  Frame f;
  char* name = nullptr;
  if (log->Check(env, (*env)->GetMethodName(env, fi.method, &name, nullptr, nullptr),
                 "GetMethodName")) {
    f.function = TakeString(env, name);
  } else {
    f.function = "<unknown>";
  }
  char* file = nullptr;
  if (log->Check(env, (*env)->GetMethodSourceFile(env, fi.method, &file), "GetMethodSourceFile")) {
    f.file = TakeString(env, file);
  }
  vmtiInt line = 0;
  if (log->Check(env, (*env)->GetLineNumber(env, fi.method, fi.location, &line), "GetLineNumber")) {
    f.line = line;
  }
  std::lock_guard<std::mutex> g(mu_);
  uint32_t id = InternFrameLocked(f);
  by_location_.emplace(ml, id);
  return id;
}

uint32_t SiteTable::CaptureStack(vmtiEnv* env, int max_depth, ErrorLog* log) {
  // One buffer per thread: callbacks never allocate for the common case.
  thread_local std::vector<vmtiFrameInfo> buffer;
  thread_local std::vector<uint32_t> ids;
  if (static_cast<int>(buffer.size()) < max_depth) buffer.resize(max_depth);
  vmtiInt count = 0;
  if (!log->Check(env, (*env)->GetStackTrace(env, nullptr, 0, max_depth, buffer.data(), &count),
                  "GetStackTrace") ||
      count <= 0) {
    return kUnknown;
  }
  ids.clear();
  for (vmtiInt i = 0; i < count; i++) ids.push_back(ResolveFrame(env, buffer[i], log));
  std::string key(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(uint32_t));
  std::lock_guard<std::mutex> g(mu_);
  return InternLocked(&stack_index_, &stacks_, std::move(key), ids);
}

uint32_t SiteTable::InternString(const std::string& s) {
  std::lock_guard<std::mutex> g(mu_);
  return InternLocked(&string_index_, &strings_, s, s);
}

uint32_t SiteTable::ClassName(vmtiEnv* env, vmtiClass klass, ErrorLog* log) {
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = classes_.find(klass);
    if (it != classes_.end()) return it->second;
  }
  char* sig = nullptr;
  if (!log->Check(env, (*env)->GetClassSignature(env, klass, &sig, nullptr), "GetClassSignature")) {
    return kUnknown;
  }
  uint32_t id = InternString(TakeString(env, sig));
  std::lock_guard<std::mutex> g(mu_);
  classes_.emplace(klass, id);
  return id;
}

uint32_t SiteTable::ThreadName(vmtiEnv* env, vmtiThread thread, ErrorLog* log) {
  // Callbacks run on the thread they report, so the name is cached per OS
  // thread; the handle is compared in case a thread object is ever reused.
  thread_local vmtiThread cached_thread = nullptr;
  thread_local const SiteTable* cached_table = nullptr;
  thread_local uint32_t cached_id = kUnknown;
  if (cached_table == this && cached_thread == thread && thread != nullptr) return cached_id;
  vmtiThreadInfo info;
  std::memset(&info, 0, sizeof info);
  if (!log->Check(env, (*env)->GetThreadInfo(env, thread, &info), "GetThreadInfo")) {
    return kUnknown;
  }
  uint32_t id = InternString(TakeString(env, info.name));
  cached_thread = thread;
  cached_table = this;
  cached_id = id;
  return id;
}

void SiteTable::Copy(Snapshot* out) const {
  std::lock_guard<std::mutex> g(mu_);
  out->frames.assign(frames_.begin(), frames_.end());
  out->stacks.assign(stacks_.begin(), stacks_.end());
  out->strings.assign(strings_.begin(), strings_.end());
}

Frame SiteTable::GetFrame(uint32_t id) const {
  std::lock_guard<std::mutex> g(mu_);
  return id < frames_.size() ? frames_[id] : frames_[0];
}

std::vector<uint32_t> SiteTable::GetStack(uint32_t id) const {
  std::lock_guard<std::mutex> g(mu_);
  return id < stacks_.size() ? stacks_[id] : stacks_[0];
}

uint32_t SiteTable::LeafFrame(uint32_t id) const {
  std::lock_guard<std::mutex> g(mu_);
  return id < stacks_.size() ? stacks_[id][0] : 0;
}

std::string SiteTable::GetString(uint32_t id) const {
  std::lock_guard<std::mutex> g(mu_);
  return id < strings_.size() ? strings_[id] : strings_[0];
}

}  // namespace agent
