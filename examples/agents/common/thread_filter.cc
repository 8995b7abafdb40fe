#include "thread_filter.h"

#include <cstring>

#include "sites.h"

namespace agent {

bool ThreadFilter::Parse(const std::string& text) {
  wants_.clear();
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    const size_t next = text.find('+', pos);
    parts.push_back(text.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].empty()) {
      wants_.push_back(Want{parts[i], false});
    } else if (wants_.empty() || wants_.back().descendants ||
               (i + 1 < parts.size() && parts[i + 1].empty() && i + 2 < parts.size())) {
      return false;  // "+a", "a+++b"
    } else {
      wants_.back().descendants = true;
      // "a++b": the empty part after "a+" is consumed by the marker.
      if (i + 1 < parts.size() && parts[i + 1].empty()) ++i;
    }
  }
  return !wants_.empty();
}

bool ThreadFilter::Select(vmtiEnv* env, vmtiThread thread, ErrorLog* log) {
  vmtiThreadInfo info;
  std::memset(&info, 0, sizeof info);
  if (!log->Check(env, (*env)->GetThreadInfo(env, thread, &info), "GetThreadInfo")) return false;
  const std::string name = TakeString(env, info.name);
  bool selected = false;
  bool with_descendants = false;
  for (const Want& w : wants_) {
    if (w.name == name) {
      selected = true;
      with_descendants = with_descendants || w.descendants;
    }
  }
  bool any_descendants = false;
  for (const Want& w : wants_) any_descendants = any_descendants || w.descendants;
  if (any_descendants) {
    vmtiThread parent = nullptr;
    // Asked only when some name wants its descendants: GetThreadParent is
    // a second-edition function.
    if (log->Check(env, (*env)->GetThreadParent(env, thread, &parent), "GetThreadParent")) {
      std::lock_guard<std::mutex> g(mu_);
      if (parent != nullptr && roots_.count(parent) > 0) selected = with_descendants = true;
      if (with_descendants) roots_.insert(thread);
    }
  }
  if (selected) {
    std::lock_guard<std::mutex> g(mu_);
    selected_.push_back(thread);
  }
  return selected;
}

void ThreadFilter::EnableSamplingIfSelected(vmtiEnv* env, vmtiThread thread, ErrorLog* log) {
  if (!Select(env, thread, log)) return;
  log->Check(env,
             (*env)->SetEventNotificationMode(env, VMTI_ENABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                              thread),
             "SetEventNotificationMode(thread)");
}

void ThreadFilter::Configure(Setup* setup) const {
  setup->NotGlobally(empty() ? VMTI_EVENT_THREAD_START : VMTI_EVENT_SAMPLED_OBJECT_ALLOC);
}

std::vector<vmtiThread> ThreadFilter::Selected() {
  std::lock_guard<std::mutex> g(mu_);
  return selected_;
}

void DeclareThreadsOption(OptionParser* options, std::string* out) {
  static constexpr char kWant[] =
      "thread names joined by '+', e.g. main+thread-2; NAME+ adds the threads NAME spawns";
  options->Text("threads", out, kWant, [](const std::string& value) {
    ThreadFilter filter;
    return filter.Parse(value) ? std::string() : std::string("want ") + kWant;
  });
}

}  // namespace agent
