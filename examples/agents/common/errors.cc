#include "errors.h"

#include <cstdio>

namespace agent {
namespace {
constexpr int64_t kMaxLoggedErrors = 5;
}  // namespace

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

}  // namespace agent
