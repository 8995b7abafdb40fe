// The JIT driver: LLJIT setup, the runtime's symbols, per-function
// compilation and the background compiler thread.
//
// Design:
//  1. Functions are compiled in groups: each is emitted into the group's
//     LLVM module and verified on its own (one that fails is erased again,
//     so a failure stays local to its Function); the module is then
//     optimised and linked into memory in one piece. --jit=auto compiles
//     groups of one (what the queue holds); --jit=eager batches the program
//     (kBatchFunctions functions or kBatchBytecode bytes each), so 100,000
//     functions are a few hundred modules and mappings, not 100,000 (one
//     per function cost milliseconds of fixed work each and exhausted
//     vm.max_map_count above about 33k). Emitting each function into its
//     own module and merging with llvm::Linker was rejected: the linker
//     re-scans the growing module per merge, quadratic in the group. Calls
//     between compiled Functions go through Function::jit_code
//     (ir_generator.cc, design 8), so functions never reference each
//     other's symbols and a group's optimisation cannot inline across them.
//  2. Optimisation: LLVM's standard per-module pipeline at -O2 (SROA/mem2reg
//     turn the slot allocas into registers; GVN, LICM and instcombine clean
//     up the tag tests), then CodeGen at -O2 through LLJIT's default
//     IRCompileLayer. Milliseconds to a few tens of milliseconds per
//     function (docs/performance.md, "JIT tier"), on the background thread.
//  3. One background thread compiles queued Functions in FIFO order
//     (--jit=auto). It never touches the heap (it reads bytecode, inline
//     caches and Klass pointers, none of which move), so it is not a mutator
//     and never takes part in safepoints. Code is published with a release
//     store after LLJIT has materialised it.
//  4. Runtime entry points (runtime.h) are absolute symbols in the main
//     JITDylib; nothing else is resolved from the process.
//  5. Linking: JITLink's ObjectLinkingLayer with .eh_frame registration,
//     configured here as LLJIT configures it by default on x86-64 and
//     AArch64 (small code model, PIC), so that the JIT's own plugins can
//     see each linked function's final address range (perf_map.h).
//  6. Code memory is capped (--jit-memory, code_memory.h). A group that does
//     not fit, like any other failure to compile, link or map, leaves its
//     functions interpreted with one line each under --verbose:jit; ORC's
//     own error reports are routed to those lines instead of stderr (no
//     "JIT session error" floods), and once the cap is reached nothing more
//     is compiled.
#include "vm/jit/jit.h"

#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/EPCEHFrameRegistrar.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Transforms/Scalar/EarlyCSE.h"
#include "llvm/Transforms/Scalar/GVN.h"
#include "llvm/Transforms/Scalar/SROA.h"
#include "llvm/Transforms/Scalar/SimplifyCFG.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "vm/jit/code_memory.h"
#include "vm/jit/ir_generator.h"
#include "vm/jit/perf_map.h"
#include "vm/jit/runtime.h"
#include "vm/runtime/thread.h"

namespace minivm::jit {
namespace {

std::string ToString(llvm::Error error) {
  std::string message;
  llvm::handleAllErrors(std::move(error),
                        [&](const llvm::ErrorInfoBase& e) { message = e.message(); });
  return message;
}

// ELF symbol for a Function: unique by index, readable by name.
std::string SymbolFor(const Function& fn) {
  std::string s = absl::StrCat("minivm.", fn.index, ".");
  for (char c : fn.name) s.push_back((std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_');
  return s;
}

// The perf map's name for a linked symbol (SymbolFor's "minivm.INDEX.NAME"):
// `minivm:NAME (FILE:LINE)`, "" for anything else.
std::string PerfMapName(const Program& program, llvm::StringRef symbol) {
  if (!symbol.consume_front("minivm.")) return "";
  size_t index = 0;
  if (symbol.consumeInteger(10, index) || index >= program.functions.size()) return "";
  const Function& fn = *program.functions[index];
  return absl::StrCat("minivm:", fn.name, " (", program.path, ":", fn.line, ")");
}

llvm::OptimizationLevel ToLevel(int level) {
  switch (level) {
    case 0:
      return llvm::OptimizationLevel::O0;
    case 1:
      return llvm::OptimizationLevel::O1;
    case 3:
      return llvm::OptimizationLevel::O3;
    default:
      return llvm::OptimizationLevel::O2;
  }
}

}  // namespace

struct Jit::Impl {
  const VM* vm = nullptr;
  JitConfig config;
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::unique_ptr<llvm::TargetMachine> target_machine;  // for the IR pipeline's cost model

  // Serialises Compile (LLJIT is thread-safe; the statistics, the log and
  // the target machine are simpler kept under one lock).
  std::mutex compile_mu;
  Stats stats;  // guarded by compile_mu

  CappedCodeMemory* code_memory = nullptr;  // owned by the linking layer
  bool memory_full = false;                 // guarded by compile_mu (design 6)
  // The latest error ORC reported through the session rather than through
  // a lookup's result: the reason a group failed.
  std::mutex session_error_mu;
  std::string session_error;  // guarded by session_error_mu

  // Compiles the functions of `fns` that are neither compiled nor refused
  // as one group (design 1). Caller holds compile_mu.
  void CompileGroup(const std::vector<const Function*>& fns);
  // Marks `fn` kFailed with one line under --verbose:jit.
  void Refuse(const Function* fn, absl::string_view why);

  // The background compiler (design 3).
  std::mutex queue_mu;
  std::condition_variable queue_cv;
  std::deque<const Function*> queue;  // guarded by queue_mu
  bool stopping = false;              // guarded by queue_mu
  std::thread worker;                 // started by the first OnHot

  absl::Status Optimize(llvm::Module* module);
};

absl::StatusOr<std::unique_ptr<Jit>> Jit::Create(const VM* vm, JitConfig config) {
  static std::once_flag init_once;
  std::call_once(init_once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  auto impl = std::make_unique<Impl>();
  impl->vm = vm;
  impl->config = std::move(config);

  llvm::Expected<llvm::orc::JITTargetMachineBuilder> jtmb =
      llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return absl::InternalError(absl::StrCat("JIT: ", ToString(jtmb.takeError())));
  jtmb->setCodeGenOptLevel(impl->config.opt_level == 0 ? llvm::CodeGenOptLevel::None
                                                       : llvm::CodeGenOptLevel::Default);
  // What LLJIT sets when it picks JITLink itself (design 5).
  jtmb->setCodeModel(llvm::CodeModel::Small);
  jtmb->setRelocationModel(llvm::Reloc::PIC_);
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> tm = jtmb->createTargetMachine();
  if (!tm) return absl::InternalError(absl::StrCat("JIT: ", ToString(tm.takeError())));
  impl->target_machine = std::move(*tm);

  std::shared_ptr<PerfMapPlugin> perf_map;
  if (!impl->config.perf_map.empty()) {
    const Program* program = &vm->program();
    absl::StatusOr<std::shared_ptr<PerfMapPlugin>> opened = PerfMapPlugin::Open(
        impl->config.perf_map,
        [program](llvm::StringRef symbol) { return PerfMapName(*program, symbol); });
    if (!opened.ok()) return opened.status();
    perf_map = *std::move(opened);
  }
  Impl* raw_impl = impl.get();
  auto create_linking_layer = [perf_map, raw_impl](llvm::orc::ExecutionSession& es,
                                                   const llvm::Triple&)
      -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
    llvm::Expected<std::unique_ptr<CappedCodeMemory>> memory =
        CappedCodeMemory::Create(raw_impl->config.memory_limit);
    if (!memory) return memory.takeError();
    raw_impl->code_memory = memory->get();
    auto layer = std::make_unique<llvm::orc::ObjectLinkingLayer>(es, std::move(*memory));
    llvm::Expected<std::unique_ptr<llvm::orc::EPCEHFrameRegistrar>> eh_frames =
        llvm::orc::EPCEHFrameRegistrar::Create(es);
    if (!eh_frames) return eh_frames.takeError();
    layer->addPlugin(
        std::make_unique<llvm::orc::EHFrameRegistrationPlugin>(es, std::move(*eh_frames)));
    if (perf_map != nullptr) layer->addPlugin(perf_map);
    return layer;
  };
  llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> lljit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(std::move(*jtmb))
          .setObjectLinkingLayerCreator(std::move(create_linking_layer))
          .create();
  if (!lljit) return absl::InternalError(absl::StrCat("JIT: ", ToString(lljit.takeError())));
  impl->lljit = std::move(*lljit);
  impl->lljit->getExecutionSession().setErrorReporter([raw_impl](llvm::Error e) {
    std::string message = ToString(std::move(e));
    std::lock_guard<std::mutex> lock(raw_impl->session_error_mu);
    raw_impl->session_error = std::move(message);
  });

  llvm::orc::SymbolMap symbols;
  for (const RuntimeSymbol& s : RuntimeSymbols()) {
    symbols[impl->lljit->mangleAndIntern(llvm::StringRef(s.name.data(), s.name.size()))] = {
        llvm::orc::ExecutorAddr::fromPtr(s.address),
        llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  }
  if (llvm::Error e = impl->lljit->getMainJITDylib().define(llvm::orc::absoluteSymbols(symbols))) {
    return absl::InternalError(absl::StrCat("JIT: ", ToString(std::move(e))));
  }
  return std::unique_ptr<Jit>(new Jit(std::move(impl)));
}

Jit::Jit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Jit::~Jit() { StopCompiling(); }

absl::Status Jit::Impl::Optimize(llvm::Module* module) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(target_machine.get());
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (config.opt_level == 0) {
    mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0);
  } else if (config.opt_level == 1) {
    // The light pipeline (design 2): slots to registers, then the clean-ups
    // that matter for tag tests and reloads, without LLVM's loop and
    // inter-procedural machinery.
    llvm::FunctionPassManager fpm;
    fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
    fpm.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
    fpm.addPass(llvm::InstCombinePass());
    fpm.addPass(llvm::SimplifyCFGPass());
    fpm.addPass(llvm::GVNPass());
    fpm.addPass(llvm::InstCombinePass());
    fpm.addPass(llvm::SimplifyCFGPass());
    mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
  } else {
    mpm = pb.buildPerModuleDefaultPipeline(ToLevel(config.opt_level));
  }
  mpm.run(*module, mam);
  return absl::OkStatus();
}

bool Jit::Compile(const Function* fn) {
  std::lock_guard<std::mutex> lock(impl_->compile_mu);
  impl_->CompileGroup({fn});
  return fn->jit_code.load(std::memory_order_acquire) != nullptr;
}

void Jit::CompileAll() {
  std::lock_guard<std::mutex> lock(impl_->compile_mu);
  std::vector<const Function*> batch;
  size_t bytes = 0;
  for (const auto& fn : impl_->vm->program().functions) {
    batch.push_back(fn.get());
    bytes += fn->code.size();
    if (batch.size() >= kBatchFunctions || bytes >= kBatchBytecode) {
      impl_->CompileGroup(batch);
      batch.clear();
      bytes = 0;
    }
  }
  if (!batch.empty()) impl_->CompileGroup(batch);
}

void Jit::Impl::Refuse(const Function* fn, absl::string_view why) {
  fn->jit_state.store(JitState::kFailed, std::memory_order_relaxed);
  ++stats.failed;
  if (config.verbose) {
    absl::FPrintF(config.log, "[jit] %s: not compiled, stays interpreted: %s\n", fn->name, why);
  }
}

void Jit::Impl::CompileGroup(const std::vector<const Function*>& fns) {
  const auto start = std::chrono::steady_clock::now();
  auto context = std::make_unique<llvm::LLVMContext>();
  auto group = std::make_unique<llvm::Module>(SymbolFor(*fns.front()), *context);
  group->setDataLayout(lljit->getDataLayout());
  group->setTargetTriple(lljit->getTargetTriple().str());
  std::vector<std::pair<const Function*, std::string>> members;
  std::vector<std::vector<InlinedCall>> members_inlined;  // by member, for --verbose:jit
  for (const Function* fn : fns) {
    if (fn->jit_code.load(std::memory_order_acquire) != nullptr) continue;
    if (fn->code.size() > kMaxCompiledBytecode) {
      fn->jit_state.store(JitState::kFailed, std::memory_order_relaxed);
      if (config.verbose) {
        absl::FPrintF(config.log,
                      "[jit] %s: stays interpreted: %d bytes of bytecode, more than the %d "
                      "compiled\n",
                      fn->name, fn->code.size(), kMaxCompiledBytecode);
      }
      continue;
    }
    if (memory_full) {
      Refuse(fn, absl::StrCat("JIT memory limit reached (--jit-memory=", config.memory_limit,
                              " bytes)"));
      continue;
    }
    // Emitted straight into the group's module; a function that fails is
    // erased again, leaving the others (and the shared declarations of the
    // runtime entry points) intact.
    std::string symbol = SymbolFor(*fn);
    std::vector<InlinedCall> inlined;
    absl::Status emitted = EmitFunction(*vm, *fn, symbol, group.get(), &inlined);
    llvm::Function* ir = group->getFunction(symbol);
    if (emitted.ok() && ir != nullptr) {
      std::string verifier_errors;
      llvm::raw_string_ostream verifier_stream(verifier_errors);
      if (llvm::verifyFunction(*ir, &verifier_stream)) {
        verifier_stream.flush();
        emitted = absl::InternalError(
            absl::StrCat("invalid IR: ", verifier_errors.substr(0, verifier_errors.find('\n'))));
      }
    }
    if (!emitted.ok()) {
      if (ir != nullptr) ir->eraseFromParent();
      Refuse(fn, emitted.message());
      continue;
    }
    members.emplace_back(fn, std::move(symbol));
    members_inlined.push_back(std::move(inlined));
  }
  if (members.empty()) return;
  auto refuse_all = [&](absl::string_view why) {
    for (const auto& member : members) Refuse(member.first, why);
  };
  if (absl::Status s = Optimize(group.get()); !s.ok()) return refuse_all(s.message());
  if (config.print) {
    for (const auto& [fn, symbol] : members) {
      if (!config.print_only.empty() && config.print_only != fn->name) continue;
      std::string text;
      llvm::raw_string_ostream os(text);
      group->getFunction(symbol)->print(os);
      os.flush();
      absl::FPrintF(config.log, "; --print-jit: %s\n%s\n", fn->name, text);
    }
  }
  {
    std::lock_guard<std::mutex> lock(session_error_mu);
    session_error.clear();
  }
  if (llvm::Error e =
          lljit->addIRModule(llvm::orc::ThreadSafeModule(std::move(group), std::move(context)))) {
    return refuse_all(ToString(std::move(e)));
  }
  // The first lookup compiles, links and maps the whole group.
  std::vector<void*> addresses;
  for (const auto& member : members) {
    llvm::Expected<llvm::orc::ExecutorAddr> address = lljit->lookup(member.second);
    if (!address) {
      std::string why = ToString(address.takeError());
      {
        std::lock_guard<std::mutex> lock(session_error_mu);
        if (!session_error.empty()) why = session_error;  // the cause, not "failed to materialize"
      }
      if (code_memory != nullptr && why.find("JIT memory limit") != std::string::npos) {
        memory_full = true;
      }
      return refuse_all(why);
    }
    addresses.push_back(address->toPtr<void*>());
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  stats.compiled += members.size();
  stats.total_ms += ms;
  for (size_t i = 0; i < members.size(); ++i) {
    const Function* fn = members[i].first;
    fn->jit_code.store(reinterpret_cast<JitEntry>(addresses[i]), std::memory_order_release);
    fn->jit_state.store(JitState::kCompiled, std::memory_order_relaxed);
    if (config.verbose) {
      // A group's time is shared out evenly among its functions.
      absl::FPrintF(config.log, "[jit] compiled %s (%d bytes of bytecode) in %.3fms at %p\n",
                    fn->name, fn->code.size(), ms / static_cast<double>(members.size()),
                    addresses[i]);
      for (const InlinedCall& call : members_inlined[i]) {
        absl::FPrintF(config.log, "[jit] %s: inlined %s (line %d%s)\n", fn->name,
                      call.callee->name, call.line,
                      call.caller == fn ? "" : absl::StrCat(", in ", call.caller->name));
      }
    }
  }
}

void Jit::OnHot(VMThread* t, const Function* fn) {
  JitState expected = JitState::kInterpreted;
  if (!fn->jit_state.compare_exchange_strong(expected, JitState::kQueued,
                                             std::memory_order_relaxed)) {
    return;  // queued, compiled or failed already
  }
  if (impl_->config.sync) {
    // The compiler never touches the heap, so the thread may count as
    // blocked: a safepoint need not wait for the compilation.
    gc::BlockedScope blocked(&t->mutator);
    Compile(fn);
    return;
  }
  std::lock_guard<std::mutex> lock(impl_->queue_mu);
  if (impl_->stopping) return;
  impl_->queue.push_back(fn);
  if (!impl_->worker.joinable()) {
    impl_->worker = std::thread([this] { WorkerLoop(this); });
  }
  impl_->queue_cv.notify_one();
}

void Jit::OnOsr(const Function* fn, uint32_t offset) {
  if (!impl_->config.verbose) return;
  // No lock: one FPrintF is one locked stdio write, and compile_mu may be
  // held for milliseconds by a compilation.
  absl::FPrintF(impl_->config.log, "[jit] %s: on-stack replacement at line %d\n", fn->name,
                fn->lines.LineFor(offset));
}

void Jit::StopCompiling() {
  {
    std::lock_guard<std::mutex> lock(impl_->queue_mu);
    impl_->stopping = true;
    impl_->queue.clear();
  }
  impl_->queue_cv.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

Jit::Stats Jit::stats() const {
  std::lock_guard<std::mutex> lock(impl_->compile_mu);
  return impl_->stats;
}

void Jit::WorkerLoop(Jit* jit) {
  for (;;) {
    const Function* fn;
    {
      std::unique_lock<std::mutex> lock(jit->impl_->queue_mu);
      jit->impl_->queue_cv.wait(lock,
                                [&] { return jit->impl_->stopping || !jit->impl_->queue.empty(); });
      if (jit->impl_->stopping) return;
      fn = jit->impl_->queue.front();
      jit->impl_->queue.pop_front();
    }
    jit->Compile(fn);
  }
}

}  // namespace minivm::jit
