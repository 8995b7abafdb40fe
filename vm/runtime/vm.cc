#include "vm/runtime/vm.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gc/write_barrier.h"
#include "vm/runtime/attach_listener.h"
#include "vm/runtime/builtin_classes.h"
#include "vm/runtime/errors.h"
#include "vm/runtime/interpreter.h"
#include "vm/runtime/signal_dispatcher.h"
#include "vm/runtime/standard_streams.h"
#include "vm/runtime/strings.h"

namespace minivm {
namespace {

// How long a signal's end waits to flush the program's output before it
// posts VMDeath without it (VM::FlushOutputWithin); well inside the bound
// on the whole end (kEndBoundSeconds).
constexpr std::chrono::seconds kOutputWait{2};
static_assert(kOutputWait.count() < kEndBoundSeconds);

}  // namespace

VM::VM(std::unique_ptr<Program> program, VmOptions options)
    : program_(std::move(program)), options_(std::move(options)) {
  for (const auto& f : program_->functions) functions_.push_back(f.get());
  for (const auto& k : program_->classes) classes_.push_back(k.get());
  globals_.resize(program_->global_names.size());
  string_constants_.resize(program_->string_constants.size());
}

absl::StatusOr<std::unique_ptr<VM>> VM::Create(std::unique_ptr<Program> program,
                                               VmOptions options) {
  if (program == nullptr) return absl::InvalidArgumentError("no program");
  if (program->main_function >= program->functions.size() ||
      program->init_function >= program->functions.size()) {
    return absl::InvalidArgumentError("the program has no main or init function");
  }
  if (options.stack_depth < 1) {
    return absl::InvalidArgumentError("--stack-depth must be at least 1");
  }
  std::unique_ptr<VM> vm(new VM(std::move(program), std::move(options)));
  absl::StatusOr<std::unique_ptr<gc::Heap>> heap = gc::Heap::Create(vm->options_.heap, vm.get());
  if (!heap.ok()) return heap.status();
  vm->heap_ = *std::move(heap);
  absl::StatusOr<std::unique_ptr<VMThread>> main =
      VMThread::Create(vm.get(), 0, "main", vm->options_.stack_depth, Rng(vm->options_.seed, 0));
  if (!main.ok()) return main.status();
  vm->main_thread_ = main->get();
  std::lock_guard<std::mutex> lock(vm->threads_mu_);
  vm->thread_set_.insert(main->get());
  vm->threads_.push_back(*std::move(main));
  return vm;
}

VM::~VM() {
  // The background compiler reads Functions; stop it before anything goes.
  if (jit_ != nullptr) jit_->StopCompiling();
  std::vector<std::thread*> running;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    for (auto& t : threads_) {
      if (t->os_thread.joinable()) running.push_back(&t->os_thread);
    }
  }
  for (std::thread* th : running) th->join();
  {
    // In-process VMs only (with exit_process the VM is never destroyed):
    // agent threads are detached, and use this VM until their body returns.
    std::unique_lock<std::mutex> lock(threads_mu_);
    thread_finished_.wait(lock, [this] {
      for (const auto& t : agent_threads_) {
        if (t->lifecycle != ThreadLifecycle::kFinished) return false;
      }
      return true;
    });
  }
  // No thread runs compiled code any more.
  jit_.reset();
  std::lock_guard<std::mutex> lock(threads_mu_);
  threads_.clear();
}

bool VM::MaterializeStrings(VMThread* t) {
  for (size_t i = 0; i < string_constants_.size(); ++i) {
    gc::Object* s = NewString(t, program_->string_constants[i]);
    if (s == nullptr) return false;
    string_constants_[i] = gc::Value::Ref(s);
  }
  return true;
}

Outcome VM::RunFunction(VMThread* t, const Function* fn, gc::Value* result) {
  Frame* const saved_fp = t->fp;
  gc::Value* const saved_sp = t->sp - fn->arity;
  const Outcome outcome = Interpret(t, fn);
  if (outcome == Outcome::kReturn) {
    *result = t->sp[-1];
  } else if (outcome == Outcome::kError) {
    ReportError(t);
  } else {
    RequestExit(t, t->exit_code);
  }
  t->fp = saved_fp;
  t->sp = saved_sp;
  return outcome;
}

int VM::Run() {
  VMThread* t = main_thread_;
  t->SetNativeStackLimit();
  heap_->AttachMutator(&t->mutator);
  int code = 0;
  gc::Value ignored;
  if (!MaterializeStrings(t)) {
    ReportError(t);
    code = 1;
  } else {
    // Agents go LIVE here: string constants are not sampled, the program is.
    if (ToolHooks* hooks = hooks_.load(std::memory_order_acquire); hooks != nullptr) {
      hooks->OnVMInit(t);
      // Only now: main may be stopped for good inside VMInit (at a safepoint
      // a VMTI call waits for), and VMDeath must not run beside a VMInit
      // callback frozen half-way.
      vm_init_done_.store(true);
    }
    // From here on an agent may attach (AttachToolHooks): it skips VMInit.
    started_.store(true, std::memory_order_release);
    Outcome o = RunFunction(t, functions_[program_->init_function], &ignored);
    if (o == Outcome::kReturn) {
      o = RunFunction(t, functions_[program_->main_function], &ignored);
    }
    if (o == Outcome::kError) code = 1;
    if (o == Outcome::kExit) code = t->exit_code;
  }
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    t->lifecycle = ThreadLifecycle::kFinished;
    thread_finished_.notify_all();
  }
  // Without exit_process, a failure in another thread also fails the run.
  if (code == 0) code = exit_code_.load();
  // With exit_process, main stays attached: ExitProcess stops the world
  // with it as the safepoint's owner before VMDeath.
  if (!options_.exit_process) {
    Die(t);
    heap_->DetachMutator(&t->mutator);
  }
  return code;
}

void VM::Die(VMThread* t) {
  // No VMInit, no VMDeath (JVMTI's rule for a VM that never started): a
  // signal before VMInit completed, or heap exhaustion making the string
  // constants. With exit_process the caller has stopped every thread, main
  // included, so the flag cannot change any more.
  ToolHooks* hooks = hooks_.load(std::memory_order_acquire);
  if (hooks == nullptr || !vm_init_done_.load() || died_.exchange(true)) return;
  // A signal's end does not count the agents' time here against its bound
  // (vm/runtime/signal_dispatcher.h).
  VMDeathBegins();
  hooks->OnVMDeath(t);
  VMDeathEnded();
}

void VM::StopForever(VMThread* t) {
  gc::BlockedScope blocked(&t->mutator);
  for (;;) pause();
}

void VM::EndProcess(VMThread* t, int code, bool output_locked) {
  if (hooks_.load() != nullptr) {
    // Every other thread stops at its next poll and never resumes, so
    // VMDeath is really the last event (callbacks in flight finish first: a
    // thread in a callback is not at a poll). Without agents nothing needs
    // them stopped: the output lock ends the process between two lines.
    heap_->StopMutatorsForExit(t != nullptr ? &t->mutator : nullptr);
  }
  // The output lock is taken after the stop: a thread waiting for it
  // outside a blocked region (ReportError) must not hold the stop up.
  // The program's output goes out before the agents' last word, so that a
  // second signal during a slow VMDeath cannot lose it. On a signal's end
  // (no VM thread), output that cannot be written soon (a pipe nobody
  // reads) is given up instead, so that agents still get VMDeath.
  if (t == nullptr && !output_locked) {
    if (!FlushOutputWithin()) {
      Die(t);
      RemoveAttachSocket();
      std::fprintf(options_.err,
                   "minivm: error: cannot write to stdout: still blocked %d s after the signal\n",
                   static_cast<int>(kOutputWait.count()));
      std::fflush(options_.err);
      ExitWithoutFlushing(code);
    }
  } else {
    if (!output_locked) output_mu_.lock();
    FlushOutputLocked();
  }
  Die(t);
  ExitProcessLocked(code);
}

void VM::FlushOutputLocked() {
  // A failure is kept for ExitProcessLocked: a later flush no longer knows
  // its reason.
  errno = 0;
  if (std::fflush(options_.out) != 0 && out_errno_ == 0) out_errno_ = errno != 0 ? errno : EIO;
}

bool VM::FlushOutputWithin() {
  struct Flushed {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto flushed = std::make_shared<Flushed>();
  try {
    std::thread([this, flushed] {
      output_mu_.lock();
      FlushOutputLocked();
      {
        std::lock_guard<std::mutex> lock(flushed->mu);
        flushed->done = true;
      }
      flushed->cv.notify_all();
      // output_mu_ stays held until the process ends, as the ending thread
      // would hold it: no print may follow.
      for (;;) pause();
    }).detach();
  } catch (const std::system_error&) {
    output_mu_.lock();
    FlushOutputLocked();
    return true;
  }
  std::unique_lock<std::mutex> lock(flushed->mu);
  return flushed->cv.wait_for(lock, kOutputWait, [&] { return flushed->done; });
}

void VM::ExitProcess(int code) {
  if (!ClaimEnd()) StopForever(main_thread_);
  EndProcess(main_thread_, code, /*output_locked=*/false);
}

void VM::Shutdown(int code) {
  if (!options_.exit_process || !ClaimEnd()) return;
  EndProcess(nullptr, code, /*output_locked=*/false);
}

void VM::EndProcessOnExit() {
  // The output lock is not taken: the thread calling exit() may be the one
  // holding it (a callback during a print); stdio's own lock orders the
  // flush after a print under way.
  on_exit([](int status, void* vm) { static_cast<VM*>(vm)->ExitProcessLocked(status); }, this);
}

void VM::ExitProcessLocked(int code) {
  // An agent still in Agent_OnAttach has the VM's stderr on a pipe
  // (agent_api/attach_host.h): the real one back, and what is in the pipe
  // written out, before the last words below. A listening attach socket
  // would outlive the process as a stale file.
  PrepareAttachForExit();
  RemoveAttachSocket();
  // Output lost at any time in the run (to a full disk, a closed stdout)
  // fails the run here (vm/runtime/standard_streams.h).
  _exit(FinishStandardStreams(options_.out, options_.err, code, out_errno_));
}

void VM::ReportError(VMThread* t) {
  if (error_reported_.exchange(true)) {
    if (!options_.exit_process) return;
    StopForever(t);  // another thread is ending the process
  }
  const std::string text = FormatRuntimeError(t->error, t->StackTrace(*program_), program_->path);
  output_mu_.lock();
  std::fflush(options_.out);
  std::fwrite(text.data(), 1, text.size(), options_.err);
  std::fflush(options_.err);
  if (options_.exit_process) {
    if (!ClaimEnd()) {
      // The VM is already ending (exit(n) elsewhere, or a signal): that end
      // needs the output lock.
      output_mu_.unlock();
      StopForever(t);
    }
    // Holding the lock keeps other threads' output from following the
    // error message; they wait for it in a blocked region.
    EndProcess(t, 1, /*output_locked=*/true);
  }
  output_mu_.unlock();
  exit_code_.store(1);
}

void VM::RequestExit(VMThread* t, int code) {
  if (options_.exit_process) {
    if (!ClaimEnd()) StopForever(t);
    EndProcess(t, code, /*output_locked=*/false);
  }
  int expected = 0;
  exit_code_.compare_exchange_strong(expected, code);
}

bool VM::WriteLine(VMThread* t, std::string_view line) {
  // Blocked: a thread waiting for the lock or for a full pipe must not hold
  // up a safepoint. `line` is C++ memory, not heap memory.
  gc::BlockedScope blocked(&t->mutator);
  std::lock_guard<std::mutex> lock(output_mu_);
  errno = 0;
  const size_t written = std::fwrite(line.data(), 1, line.size(), options_.out);
  if (written == line.size() && std::ferror(options_.out) == 0) return true;
  // The first failure's reason: a flush at exit may no longer know it.
  if (out_errno_ == 0) out_errno_ = errno != 0 ? errno : EIO;
  return false;
}

bool VM::AttachToolHooks(ToolHooks* hooks) {
  if (!started_.load(std::memory_order_acquire)) return false;
  ToolHooks* expected = nullptr;
  if (!hooks_.compare_exchange_strong(expected, hooks)) return expected == hooks;
  vm_init_done_.store(true);
  // Both sequentially consistent: either the end sees the hooks (and stops
  // the world before VMDeath) or this sees the end and the caller loads no
  // agent (a VMDeath posted without the stop then reaches no environment).
  return !ending_.load();
}

VMThread* VM::FindThread(const void* handle, bool* alive) const {
  std::lock_guard<std::mutex> lock(threads_mu_);
  auto* t = static_cast<const VMThread*>(handle);
  if (!thread_set_.contains(t)) return nullptr;
  *alive = t->lifecycle != ThreadLifecycle::kFinished;
  return const_cast<VMThread*>(t);
}

std::vector<VMThread*> VM::LiveThreads() const {
  std::lock_guard<std::mutex> lock(threads_mu_);
  std::vector<VMThread*> live;
  for (const auto& t : threads_) {
    if (t->lifecycle == ThreadLifecycle::kRunning || t.get() == main_thread_) live.push_back(t.get());
  }
  for (const auto& t : agent_threads_) {
    if (t->lifecycle == ThreadLifecycle::kRunning) live.push_back(t.get());
  }
  return live;
}

const Klass* VM::FindClass(const void* klass) const {
  for (const Klass* k : {ArrayKlass(), BytesKlass(), StringKlass(), ThreadKlass()}) {
    if (k == klass) return k;
  }
  for (const Klass* k : classes_) {
    if (k == klass) return k;
  }
  return nullptr;
}

absl::StatusOr<VMThread*> VM::StartAgentThread(std::string name,
                                               std::function<void(VMThread*)> body) {
  VMThread* t;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    const int index = -static_cast<int>(agent_threads_.size()) - 1;
    // One frame of room: the thread never runs language code, but its empty
    // frame array makes depth() 0 like any thread's before its first call.
    absl::StatusOr<std::unique_ptr<VMThread>> created =
        VMThread::Create(this, index, std::move(name), 1, Rng(options_.seed, 0));
    if (!created.ok()) return created.status();
    t = created->get();
    t->agent_thread = true;
    // Running from now on: the handle RunAgentThread returns names a live
    // thread even before the OS thread has started.
    t->lifecycle = ThreadLifecycle::kRunning;
    thread_set_.insert(t);
    agent_threads_.push_back(*std::move(created));
  }
  try {
    std::thread([this, t, body = std::move(body)] {
      body(t);
      std::lock_guard<std::mutex> lock(threads_mu_);
      t->lifecycle = ThreadLifecycle::kFinished;
      thread_finished_.notify_all();
    }).detach();  // a daemon: nobody joins it (see vm.h)
  } catch (const std::system_error& e) {
    std::lock_guard<std::mutex> lock(threads_mu_);
    t->lifecycle = ThreadLifecycle::kFinished;
    return absl::ResourceExhaustedError(absl::StrCat("cannot start an agent thread: ", e.what()));
  }
  return t;
}

size_t VM::thread_count() const {
  std::lock_guard<std::mutex> lock(threads_mu_);
  return threads_.size();
}

void VM::VisitGlobalRoots(gc::RootVisitor& visitor) {
  const bool info = visitor.WantsRootInfo();
  if (info) visitor.SetRootInfo({.kind = gc::RootKind::kGlobal, .index = 0});
  visitor.VisitRoots(globals_.data(), globals_.data() + globals_.size());
  if (info) visitor.SetRootInfo(gc::RootInfo{});  // kOther from here on
  visitor.VisitRoots(string_constants_.data(), string_constants_.data() + string_constants_.size());
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    for (auto& t : threads_) {
      visitor.VisitRoots(t->start_args.data(), t->start_args.data() + t->start_args.size());
      visitor.VisitRoot(&t->result);
    }
  }
  if (ToolHooks* hooks = hooks_.load(std::memory_order_acquire); hooks != nullptr) {
    hooks->VisitToolRoots(visitor);
  }
}

void VM::VisitMutatorRoots(gc::Mutator* mutator, gc::RootVisitor& visitor) {
  VMThread* t = VMThread::FromMutator(mutator);
  const bool info = visitor.WantsRootInfo();
  if (info) visitor.SetRootInfo(gc::RootInfo{});
  if (t->fp < t->frames_begin) {
    visitor.VisitRoots(t->stack_begin, t->sp);
    return;
  }
  // One range per frame, outermost first: frame f owns [f->base, the next
  // frame's base) and the innermost frame owns up to sp. Slots below the
  // outermost frame (none today) are reported as kOther. A frame's int mask
  // (thread.h, 5.) names slots whose homes compiled code left stale at a
  // call: they hold ints, and are skipped.
  visitor.VisitRoots(t->stack_begin, std::min(t->frames_begin->base, t->sp));
  for (const Frame* f = t->frames_begin; f <= t->fp; ++f) {
    gc::Value* const end = f < t->fp ? f[1].base : t->sp;
    auto visit = [&](gc::Value* from, gc::Value* to) {
      if (from >= to) return;
      if (info) {
        visitor.SetRootInfo({.kind = gc::RootKind::kStackSlot,
                             .thread = t,
                             .depth = static_cast<int32_t>(t->fp - f),
                             .method = f->fn,
                             .location = f->pc() != nullptr ? f->pc() - f->fn->code.data() : 0,
                             .slot = static_cast<int32_t>(from - f->base)});
      }
      visitor.VisitRoots(from, to);
    };
    gc::Value* from = f->base;
    for (uint32_t mask = f->int_mask(); mask != 0; mask &= mask - 1) {
      gc::Value* const skipped = f->base + std::countr_zero(mask);
      if (skipped >= end) break;
      visit(from, skipped);
      from = skipped + 1;
    }
    visit(from, end);
  }
}

bool VM::Spawn(VMThread* t, const Function* fn, gc::Value* args, int argc, gc::Value* result) {
  VMThread* child;
  int index;
  {
    // No allocation and no poll from here to the Allocate below, so the raw
    // argument Values copied into start_args cannot go stale before the
    // table (a root) holds them.
    std::lock_guard<std::mutex> lock(threads_mu_);
    index = static_cast<int>(threads_.size());
    absl::StatusOr<std::unique_ptr<VMThread>> created =
        VMThread::Create(this, index, absl::StrCat("thread-", index), options_.stack_depth,
                         Rng(options_.seed, static_cast<uint64_t>(index)));
    if (!created.ok()) {
      // The same runtime error as a failed pthread_create below: the program
      // asked for more threads than the address space holds.
      t->Raise(ErrorKind::kValueError,
               absl::StrCat("cannot start a thread: ", created.status().message()));
      return false;
    }
    std::unique_ptr<VMThread> owned = *std::move(created);
    owned->parent = t;
    owned->start_function = fn;
    owned->start_args.assign(args, args + argc);
    child = owned.get();
    thread_set_.insert(child);
    threads_.push_back(std::move(owned));
  }
  gc::Object* thread_obj = t->Allocate(ThreadKlass(), gc::FieldsObjectSize(kThreadFieldCount), 0);
  if (thread_obj == nullptr) {
    std::lock_guard<std::mutex> lock(threads_mu_);
    child->start_args.clear();
    child->lifecycle = ThreadLifecycle::kFinished;
    return false;
  }
  const gc::Value index_value = gc::Value::Int(index);
  thread_obj->fields()[kThreadIndexField] = index_value;
  gc::WriteBarrier(&t->mutator, thread_obj, index_value);
  *result = gc::Value::Ref(thread_obj);
  try {
    std::thread th([this, child] { ThreadMain(child); });
    if (options_.exit_process) {
      th.detach();  // the process ends with _exit; nobody joins OS threads
    } else {
      std::lock_guard<std::mutex> lock(threads_mu_);
      child->os_thread = std::move(th);
    }
  } catch (const std::system_error& e) {
    std::lock_guard<std::mutex> lock(threads_mu_);
    child->start_args.clear();
    child->lifecycle = ThreadLifecycle::kFinished;
    t->Raise(ErrorKind::kValueError, absl::StrCat("cannot start a thread: ", e.what()));
    return false;
  }
  return true;
}

void VM::ThreadMain(VMThread* t) {
  t->mutator.thread_index = static_cast<uint64_t>(t->index);
  t->SetNativeStackLimit();
  heap_->AttachMutator(&t->mutator);
  {
    // Attached and running: no collection can happen until this thread
    // polls, so the copied Values stay valid.
    std::lock_guard<std::mutex> lock(threads_mu_);
    for (gc::Value v : t->start_args) *t->sp++ = v;
    t->start_args.clear();
    t->start_args.shrink_to_fit();
    t->lifecycle = ThreadLifecycle::kRunning;
  }
  if (ToolHooks* hooks = hooks_.load(std::memory_order_acquire); hooks != nullptr) {
    hooks->OnThreadStart(t);
  }
  gc::Value result;
  // Read again at the end: an agent may have attached meanwhile (it then
  // sees ThreadEnd without ThreadStart, as in JVMTI).
  ToolHooks* hooks = nullptr;
  if (RunFunction(t, t->start_function, &result) == Outcome::kReturn &&
      (hooks = hooks_.load(std::memory_order_acquire)) != nullptr) {
    // The result is only in this C++ local now; keep it a root across the
    // callback (agents may force a collection).
    *t->sp++ = result;
    hooks->OnThreadEnd(t);
    result = *--t->sp;
  }
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    t->result = result;
    t->lifecycle = ThreadLifecycle::kFinished;
    thread_finished_.notify_all();
  }
  heap_->DetachMutator(&t->mutator);
  t->ReleaseStacks();
}

bool VM::Join(VMThread* t, gc::Value* slot) {
  const gc::Value v = *slot;
  if (!IsThread(v)) {
    t->Raise(ErrorKind::kTypeError, absl::StrCat("join expects a Thread, got ", TypeName(v)));
    return false;
  }
  const int64_t index = v.AsRef()->fields()[kThreadIndexField].AsInt();
  VMThread* target;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    target = threads_[static_cast<size_t>(index)].get();
  }
  if (target == t) {
    t->Raise(ErrorKind::kValueError, "a thread cannot join itself");
    return false;
  }
  std::string cycle;
  {
    gc::BlockedScope blocked(&t->mutator);
    std::unique_lock<std::mutex> lock(threads_mu_);
    // A join that would close a cycle of joins would wait forever: it is an
    // error on this thread instead (which ends the VM). Checked and recorded
    // under the lock, so of two threads joining each other, the second
    // sees the first's edge. A cycle through a finished thread is no cycle:
    // it will never wait again.
    for (const VMThread* u = target; u != nullptr && u->lifecycle != ThreadLifecycle::kFinished;
         u = u->joining) {
      if (u->joining == t) {
        cycle = absl::StrCat(t->name, " joins ", target->name);
        for (const VMThread* v = target; v != t; v = v->joining) {
          absl::StrAppend(&cycle, ", which is joining ", v->joining->name);
        }
        break;
      }
    }
    if (cycle.empty()) {
      t->joining = target;
      thread_finished_.wait(lock, [target] { return target->lifecycle == ThreadLifecycle::kFinished; });
      t->joining = nullptr;
    }
  }
  if (!cycle.empty()) {
    t->Raise(ErrorKind::kValueError, absl::StrCat("join: deadlock: ", cycle));
    return false;
  }
  // Read the result only after leaving the blocked state: it is a reference
  // a collection may have moved while we waited.
  std::lock_guard<std::mutex> lock(threads_mu_);
  *slot = target->result;
  return true;
}

}  // namespace minivm
