// The SIGUSR2 counter (sigusr2.h).
#include "sigusr2.h"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace heapprof {
namespace {

// A lock-free atomic is async-signal-safe and race-free.
std::atomic<uint64_t> g_sigusr2_count{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "signal-safe counter");
void OnSigusr2(int) {
  int saved = errno;
  g_sigusr2_count.fetch_add(1, std::memory_order_relaxed);
  errno = saved;
}

// The handler is installed when the first instance loads and stays
// installed until the process ends: SIGUSR2's default action ends the
// process, so a request that comes while an instance writes its final
// profile (VM death) or after an attached instance's `stop` must still find
// it. With no instance left to serve it, a request is only counted, and the
// final profile already holds what a dump would have shown.
std::once_flag g_sigusr2_once;

}  // namespace

void InstallSigusr2() {
  std::call_once(g_sigusr2_once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = OnSigusr2;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, nullptr);
  });
}

uint64_t Sigusr2Count() { return g_sigusr2_count.load(std::memory_order_relaxed); }

}  // namespace heapprof
