// The VM: owns the Program, the Heap, globals, string constants and the
// thread table, and implements gc::VmInterface (the GC's only way to
// find roots).
//
// Roots (see VisitGlobalRoots / VisitMutatorRoots):
//   - globals_: one Value per global;
//   - string_constants_: the Program's constants, materialised once at start
//     as heap Strings (PUSH_STRING pushes the slot's current value);
//   - per thread in the table: start_args until the thread has copied them
//     to its own stack, and result once it has finished (join reads it);
//   - per attached thread: its value stack [stack_begin, sp).
//
// Ending the VM: with VmOptions::exit_process (the minivm binary), main
// returning, exit(n) in any thread, a runtime error in any thread, or
// Shutdown (SIGINT/SIGTERM, from vm/runtime/signal_dispatcher.h) flushes
// stdout and ends the process with _exit while holding the output lock, so
// no other thread is mid-write and no static destructor runs under running
// threads (Go semantics: other threads are simply stopped). These race: the
// first to claim the end (ending_) posts the one VMDeath and chooses the
// exit code; every later VM thread stops for good where it is (as if at a
// safepoint) and a later Shutdown returns. Without exit_process (in-process
// tests), Run() returns the exit code instead, and the VM's destructor joins
// the threads (tests only spawn threads that finish).
#ifndef MINIVM_VM_RUNTIME_VM_H_
#define MINIVM_VM_RUNTIME_VM_H_

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "gc/heap.h"
#include "gc/vm_interface.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/interpreter.h"
#include "vm/runtime/jit_hooks.h"
#include "vm/runtime/thread.h"
#include "vm/runtime/tool_hooks.h"

namespace minivm {

struct VmOptions {
  gc::HeapOptions heap;
  uint64_t seed = 0;           // --seed
  size_t stack_depth = 10000;  // --stack-depth
  std::vector<std::string> program_args;
  FILE* out = stdout;        // print
  FILE* err = stderr;        // runtime errors
  bool exit_process = true;  // see the file comment
};

class VM final : public gc::VmInterface {
 public:
  static absl::StatusOr<std::unique_ptr<VM>> Create(std::unique_ptr<Program> program,
                                                    VmOptions options);
  ~VM() override;
  VM(const VM&) = delete;
  VM& operator=(const VM&) = delete;

  // Runs the global initialisers and then main on the calling OS thread (the
  // thread named "main") and returns the exit code: 0 when main returned,
  // 1 after a runtime error, n after exit(n). Call once.
  int Run();

  // After Run, on the main thread: posts VMDeath, flushes stdout and stderr
  // and ends the process with `code` (or stops for good if another thread
  // is already ending the VM).
  [[noreturn]] void ExitProcess(int code);

  // Ends the VM from a thread that is not a VM thread (the signal
  // dispatcher's): stops every VM thread for good at a safepoint (threads
  // blocked in join or output count as stopped), flushes stdout (giving it
  // up if it is still blocked after a moment: FlushOutputWithin), posts
  // VMDeath on the calling thread and ends the process with `code`. Returns
  // at once, doing nothing, if the VM is already ending. Only with
  // exit_process, and only once Run may have started.
  void Shutdown(int code);

  // With exit_process, once the JIT (if any) exists and before the program
  // runs: exit() called by anyone but the VM (an agent, on any thread) then
  // ends the process as the VM's own end does after VMDeath: stdout and
  // stderr flushed, the attach socket removed, the status kept, and then
  // the immediate exit. No VMDeath (a native exit() is not a VM death in
  // JVMTI either). Why: exit() would otherwise run every library's static
  // destructors while VM threads still run, and a JIT thread compiling
  // inside LLVM then faults on LLVM's destroyed statics. atexit handlers
  // registered after this call (an attached agent's) still run first; those
  // registered before it (agents loaded at start-up) and every static
  // destructor do not run, as at the program's own end (ExitProcess).
  // Rejected: interposing exit() in the executable (it would also catch
  // the C library's own uses); stopping the JIT thread in the handler (a
  // compile cannot be interrupted, and LLVM's statics made before this
  // call would already be gone).
  void EndProcessOnExit();

  // gc::VmInterface.
  void VisitGlobalRoots(gc::RootVisitor& visitor) override;
  void VisitMutatorRoots(gc::Mutator* mutator, gc::RootVisitor& visitor) override;

  // For the interpreter and built-ins.
  const Program& program() const { return *program_; }
  const VmOptions& options() const { return options_; }
  gc::Heap* heap() const { return heap_.get(); }
  gc::Value* globals() { return globals_.data(); }
  const gc::Value* string_constants() const { return string_constants_.data(); }
  const Function* const* functions() const { return functions_.data(); }
  const Klass* const* classes() const { return classes_.data(); }

  // SPAWN: starts `fn` with the arguments in slots [args, args + argc) on a
  // new OS thread and stores its Thread object in *result. Raises on `t`
  // and returns false on failure.
  bool Spawn(VMThread* t, const Function* fn, gc::Value* args, int argc, gc::Value* result);
  // join: *slot holds the Thread; the thread's result replaces it.
  bool Join(VMThread* t, gc::Value* slot);

  // Writes one whole line to stdout under the output lock (lines from
  // different threads never interleave). False if the stream has failed
  // (a full disk, a closed stdout): the caller ends the VM with exit code 1,
  // and the exit reports why (vm/runtime/standard_streams.h).
  bool WriteLine(VMThread* t, std::string_view line);

  // A thread's interpreter returned kError: prints the error and trace once
  // per VM. With exit_process it does not return (the first reporter ends
  // the process; later ones park until it has).
  void ReportError(VMThread* t);
  // exit(code) on thread t. With exit_process it does not return.
  void RequestExit(VMThread* t, int code);

  // The tool interface (agents), or null. Set before Run.
  void SetToolHooks(ToolHooks* hooks) { hooks_.store(hooks, std::memory_order_release); }
  // The tool interface of an agent loaded into the running VM (attach,
  // docs/attach.md): installs `hooks` (if none are installed yet) as if
  // VMInit had been posted to them. False, installing nothing, before Run
  // got past VMInit, and false once the VM is ending; true if `hooks` are
  // (now) the VM's.
  bool AttachToolHooks(ToolHooks* hooks);
  // True once Run has posted VMInit (if it had hooks) and runs the program.
  bool started() const { return started_.load(std::memory_order_acquire); }

  // The JIT tier, or none (--jit=off). Installed before Run; the VM owns it
  // and destroys it only after every thread that could run compiled code has
  // finished. `threshold`: the hotness (calls + loop back-edges) at which the
  // interpreter reports a Function to jit->OnHot.
  void InstallJit(std::unique_ptr<JitHooks> jit, uint32_t threshold) {
    jit_ = std::move(jit);
    jit_threshold_ = threshold;
  }
  JitHooks* jit() const { return jit_.get(); }
  uint32_t jit_threshold() const { return jit_threshold_; }

  // For the agent API, which must never trust a handle: the thread whose
  // address is `handle` (null if none; *alive = not finished), the live
  // threads, and the class (program or built-in) at `klass`, or null.
  VMThread* FindThread(const void* handle, bool* alive) const;
  std::vector<VMThread*> LiveThreads() const;
  const Klass* FindClass(const void* klass) const;

  // Agent threads (VMTI RunAgentThread): starts a daemon OS thread running
  // body(t) for a new VMThread t named `name`, marked agent_thread, with no
  // frames and no parent, never attached to the heap. It is in the thread
  // table (FindThread, LiveThreads) from this call until body returns, when
  // it becomes finished. Agent threads are numbered apart from language
  // threads (index -1, -2, ... in creation order), so that starting one
  // changes no language thread's name, index or random stream. The VM
  // never waits for one: the process may end while body runs (_exit ends
  // every thread; nothing is destroyed under it). Only an in-process VM
  // (without exit_process) waits, in its destructor, for body to return.
  // ResourceExhausted if the thread cannot be made.
  absl::StatusOr<VMThread*> StartAgentThread(std::string name, std::function<void(VMThread*)> body);

  // Number of threads ever created, main included.
  size_t thread_count() const;
  VMThread* main_thread() const { return main_thread_; }

 private:
  VM(std::unique_ptr<Program> program, VmOptions options);
  void ThreadMain(VMThread* t);
  // Interprets fn on t and handles the outcome; returns the exit code
  // contribution (0, 1 or exit(n)'s code) and the result in *result.
  Outcome RunFunction(VMThread* t, const Function* fn, gc::Value* result);
  bool MaterializeStrings(VMThread* t);
  // Requires output_mu_.
  [[noreturn]] void ExitProcessLocked(int code);
  // Requires output_mu_: flushes the program's output, keeping the first
  // failure's errno in out_errno_.
  void FlushOutputLocked();
  // Shutdown's FlushOutputLocked, on a helper thread that then keeps
  // output_mu_ for good. False if it had not finished within kOutputWait: a
  // pipe nobody reads (or a print blocked in one, holding output_mu_) must
  // not keep agents from VMDeath; the process then ends without touching
  // the program's output again.
  bool FlushOutputWithin();

  // Posts VMDeath, once, if VMInit completed (without agents: nothing).
  void Die(VMThread* t);
  // With exit_process: true for the one caller that ends the VM.
  bool ClaimEnd() { return !ending_.exchange(true); }
  // Another thread is ending the VM: never return into the program, and let
  // its safepoint count t (attached) as stopped.
  [[noreturn]] void StopForever(VMThread* t);
  // With exit_process, after winning ClaimEnd: stops every other thread for
  // good (with agents), flushes the program's output, posts VMDeath and
  // ends the process. `t` is the calling thread, or null on a thread that is
  // not a VM thread; `output_locked`: the caller holds output_mu_.
  [[noreturn]] void EndProcess(VMThread* t, int code, bool output_locked);

  // Read only at VMInit, thread start and end, and VM death: never on the
  // allocation path or in the interpreter loop. Atomic because an attached
  // agent installs it while threads run.
  std::atomic<ToolHooks*> hooks_{nullptr};
  std::atomic<bool> started_{false};  // see started()
  std::atomic<bool> ending_{false};  // see the file comment
  std::atomic<bool> vm_init_done_{false};  // every VMInit callback returned
  std::atomic<bool> died_{false};  // VMDeath posted
  std::unique_ptr<JitHooks> jit_;
  uint32_t jit_threshold_ = 0;

  std::unique_ptr<Program> program_;
  VmOptions options_;
  std::unique_ptr<gc::Heap> heap_;
  std::vector<const Function*> functions_;
  std::vector<const Klass*> classes_;
  std::vector<gc::Value> globals_;
  std::vector<gc::Value> string_constants_;

  // std::mutex rather than absl::Mutex: the distribution's Abseil is not
  // built with TSan annotations, so TSan could not see absl::Mutex's
  // happens-before edges (every TSan run would report false races).
  mutable std::mutex threads_mu_;
  std::condition_variable thread_finished_;
  std::vector<std::unique_ptr<VMThread>> threads_;  // guarded by threads_mu_
  // Agent threads, apart from threads_ (whose position is a Thread's index).
  std::vector<std::unique_ptr<VMThread>> agent_threads_;  // guarded by threads_mu_
  // The same threads, for O(1) handle validation (FindThread).
  absl::flat_hash_set<const VMThread*> thread_set_;  // guarded by threads_mu_
  VMThread* main_thread_ = nullptr;

  std::mutex output_mu_;  // held while writing to out/err and while exiting
  int out_errno_ = 0;     // guarded by output_mu_: the first failed print's errno
  std::atomic<bool> error_reported_{false};
  std::atomic<int> exit_code_{0};  // without exit_process: what Run returns
};

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_VM_H_
