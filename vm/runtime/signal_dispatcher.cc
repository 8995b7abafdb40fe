#include "vm/runtime/signal_dispatcher.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <system_error>
#include <thread>

#include "vm/runtime/attach_listener.h"
#include "vm/runtime/attach_protocol.h"
#include "vm/runtime/standard_streams.h"
#include "vm/runtime/vm.h"

namespace minivm {
namespace {

// The VM the first signal shuts down; null until SetSignalTarget.
std::atomic<VM*> g_target{nullptr};
// SIGQUIT was ignored when minivm started (`prog &` in a script): it is
// taken anyway, for attach requests, but otherwise stays ignored.
bool g_quit_ignored = false;

[[noreturn]] void ExitNow(int sig) {
  RemoveAttachSocket();  // a listening socket would outlive the process
  ExitWithoutFlushing(128 + sig);
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int64_t kSecond = 1000000000;
// While agents are in VMDeath the bound does not run; the dispatcher looks
// again this often to see whether they have returned.
constexpr int64_t kDeathPoll = kSecond / 5;

// Agents in VMDeath now (.bound), and when the last one returned
// (steady clock, ns; 0: never).
std::atomic<int> g_in_death{0};
std::atomic<int64_t> g_death_ended{0};

void SigPipeIgnored(int) {}

// How long the dispatcher may wait for the next signal after the first;
// ends the process if the end has overrun its bound (.bound).
struct timespec EndWait(int first_sig, int64_t first_at) {
  int64_t wait = kDeathPoll;
  if (g_in_death.load(std::memory_order_acquire) == 0) {
    const int64_t since = std::max(first_at, g_death_ended.load(std::memory_order_acquire));
    const int64_t left = since + kEndBoundSeconds * kSecond - NowNanos();
    if (left <= 0) ExitNow(first_sig);
    wait = std::min(left, kDeathPoll);
  }
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(wait / kSecond);
  ts.tv_nsec = static_cast<long>(wait % kSecond);
  return ts;
}

void DispatcherLoop(sigset_t handled) {
  // Started with every signal blocked: only SIGINT, SIGTERM and SIGQUIT
  // come here, through sigwait; the rest (an agent's SIGUSR2) go to the VM
  // threads, as without the dispatcher.
  int first_sig = 0;  // the signal that began the end; 0: none yet
  int64_t first_at = 0;
  for (;;) {
    int sig = 0;
    if (first_sig == 0) {
      if (sigwait(&handled, &sig) != 0) continue;
    } else {
      const struct timespec wait = EndWait(first_sig, first_at);
      sig = sigtimedwait(&handled, nullptr, &wait);
      if (sig < 0) continue;  // EAGAIN: time to look at the end again; EINTR
    }
    // An attach request (.quit) is not an end.
    if (sig == SIGQUIT && (HandleAttachSignal() || g_quit_ignored)) continue;
    if (first_sig != 0) ExitNow(sig);  // .second
    first_sig = sig;
    first_at = NowNanos();
    VM* vm = g_target.load(std::memory_order_acquire);
    if (vm == nullptr) ExitNow(sig);
    // The shutdown runs on its own thread so that this one can take a
    // second signal while agents write their outputs. It inherits the
    // all-blocked mask. If no thread can be made, shut down here.
    try {
      std::thread([vm, sig] { vm->Shutdown(128 + sig); }).detach();
    } catch (const std::system_error&) {
      vm->Shutdown(128 + sig);
    }
  }
}

}  // namespace

void StartSignalDispatcher() {
  // .pipe: Left alone if ignored at start, as the others.
  struct sigaction pipe_action;
  if (sigaction(SIGPIPE, nullptr, &pipe_action) == 0 && pipe_action.sa_handler != SIG_IGN) {
    struct sigaction sa = {};
    sa.sa_handler = SigPipeIgnored;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPIPE, &sa, nullptr);
  }
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGQUIT}) {
    struct sigaction current;
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) {
      if (sig != SIGQUIT) continue;
      g_quit_ignored = true;  // .quit
    }
    sigaddset(&handled, sig);
  }
  if (sigismember(&handled, SIGINT) != 1 && sigismember(&handled, SIGTERM) != 1 &&
      sigismember(&handled, SIGQUIT) != 1) {
    return;
  }
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, nullptr, &old);
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, nullptr);
  bool started = true;
  try {
    std::thread dispatcher(DispatcherLoop, handled);
    // The mark minivm-attach looks for before it sends SIGQUIT: a process
    // without it may die of the signal.
    pthread_setname_np(dispatcher.native_handle(), attach::kMarkerThreadName);
    dispatcher.detach();
  } catch (const std::system_error&) {
    started = false;  // the signals keep their default action (exit, no profile)
  }
  sigset_t mask = old;
  if (started) {
    for (int sig : {SIGINT, SIGTERM, SIGQUIT}) {
      if (sigismember(&handled, sig) == 1) sigaddset(&mask, sig);
    }
  }
  pthread_sigmask(SIG_SETMASK, &mask, nullptr);
}

void SetSignalTarget(VM* vm) { g_target.store(vm, std::memory_order_release); }

void VMDeathBegins() { g_in_death.fetch_add(1, std::memory_order_acq_rel); }

void VMDeathEnded() {
  g_death_ended.store(NowNanos(), std::memory_order_release);
  g_in_death.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace minivm
