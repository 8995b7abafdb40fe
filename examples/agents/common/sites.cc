#include "sites.h"

#include <cstdio>
#include <cstring>

namespace agent {
namespace {
constexpr int64_t kMaxLoggedErrors = 5;
}

bool ErrorLog::Check(vmtiEnv* env, vmtiError err, const char* what) {
  if (err == VMTI_ERROR_NONE) return true;
  int64_t n = count_.fetch_add(1, std::memory_order_relaxed);
  if (n < kMaxLoggedErrors) {
    char* name = nullptr;
    if (env == nullptr || (*env)->GetErrorName(env, err, &name) != VMTI_ERROR_NONE) {
      name = nullptr;
    }
    std::fprintf(stderr, "%s: %s failed: %s (%d)%s\n", agent_, what, name ? name : "unknown error",
                 static_cast<int>(err),
                 n + 1 == kMaxLoggedErrors ? "; further errors are counted, not shown" : "");
    if (name) (*env)->Deallocate(env, reinterpret_cast<unsigned char*>(name));
  }
  return false;
}

void ReportException(const char* agent, const char* callback, const char* what) {
  static std::atomic<int> reported{0};
  if (reported.fetch_add(1) < kMaxLoggedErrors) {
    std::fprintf(stderr, "%s: %s: %s (event dropped)\n", agent, callback, what);
  }
}

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
  auto it = frame_index_.find(key);
  if (it != frame_index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(frames_.size());
  frames_.push_back(f);
  frame_index_.emplace(std::move(key), id);
  return id;
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
  auto it = stack_index_.find(key);
  if (it != stack_index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(stacks_.size());
  stacks_.push_back(ids);
  stack_index_.emplace(std::move(key), id);
  return id;
}

uint32_t SiteTable::InternString(const std::string& s) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = string_index_.find(s);
  if (it != string_index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(strings_.size());
  strings_.push_back(s);
  string_index_.emplace(s, id);
  return id;
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
