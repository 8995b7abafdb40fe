#include "vm/runtime/signal_dispatcher.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <system_error>
#include <thread>

#include "vm/runtime/attach_listener.h"
#include "vm/runtime/attach_protocol.h"
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
  _exit(128 + sig);
}

void DispatcherLoop(sigset_t handled) {
  // Started with every signal blocked: only SIGINT, SIGTERM and SIGQUIT
  // come here, through sigwait; the rest (an agent's SIGUSR2) go to the VM
  // threads, as without the dispatcher.
  bool first = true;
  for (;;) {
    int sig = 0;
    if (sigwait(&handled, &sig) != 0) continue;
    // An attach request (design point 6) is not an end.
    if (sig == SIGQUIT && (HandleAttachSignal() || g_quit_ignored)) continue;
    if (!first) ExitNow(sig);  // design point 3
    first = false;
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
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGQUIT}) {
    struct sigaction current;
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) {
      if (sig != SIGQUIT) continue;
      g_quit_ignored = true;  // design point 6
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

}  // namespace minivm
