// The JIT driver: LLJIT setup, the runtime's symbols, per-function
// compilation and the background compiler thread.
//
// Design:
//  1. One LLVM module (and context) per Function: a failure stays local to
//     its Function, compile time is measured per Function, and compiling one
//     never waits for another. Calls between compiled Functions go through
//     Function::jit_code (ir_generator.cc, design 8), so modules never reference
//     each other's symbols.
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
  auto create_linking_layer = [perf_map](llvm::orc::ExecutionSession& es, const llvm::Triple&)
      -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
    auto layer = std::make_unique<llvm::orc::ObjectLinkingLayer>(es);
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
  if (fn->jit_code.load(std::memory_order_acquire) != nullptr) return true;
  if (fn->code.size() > kMaxCompiledBytecode) {
    fn->jit_state.store(JitState::kFailed, std::memory_order_relaxed);
    if (impl_->config.verbose) {
      absl::FPrintF(impl_->config.log,
                    "[jit] %s: stays interpreted: %d bytes of bytecode, more than the %d compiled\n",
                    fn->name, fn->code.size(), kMaxCompiledBytecode);
    }
    return false;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string symbol = SymbolFor(*fn);

  auto fail = [&](absl::string_view why) {
    fn->jit_state.store(JitState::kFailed, std::memory_order_relaxed);
    ++impl_->stats.failed;
    if (impl_->config.verbose) {
      absl::FPrintF(impl_->config.log, "[jit] %s: not compiled, stays interpreted: %s\n", fn->name,
                    why);
    }
    return false;
  };

  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>(symbol, *context);
  module->setDataLayout(impl_->lljit->getDataLayout());
  module->setTargetTriple(impl_->lljit->getTargetTriple().str());
  if (absl::Status s = EmitFunction(*impl_->vm, *fn, symbol, module.get()); !s.ok()) {
    return fail(s.message());
  }
  std::string verifier_errors;
  llvm::raw_string_ostream verifier_stream(verifier_errors);
  if (llvm::verifyModule(*module, &verifier_stream)) {
    verifier_stream.flush();
    return fail(absl::StrCat("invalid IR: ", verifier_errors.substr(0, verifier_errors.find('\n'))));
  }
  if (absl::Status s = impl_->Optimize(module.get()); !s.ok()) return fail(s.message());
  if (impl_->config.print && (impl_->config.print_only.empty() || impl_->config.print_only == fn->name)) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->getFunction(symbol)->print(os);
    os.flush();
    absl::FPrintF(impl_->config.log, "; --print-jit: %s\n%s\n", fn->name, text);
  }
  if (llvm::Error e = impl_->lljit->addIRModule(
          llvm::orc::ThreadSafeModule(std::move(module), std::move(context)))) {
    return fail(ToString(std::move(e)));
  }
  llvm::Expected<llvm::orc::ExecutorAddr> address = impl_->lljit->lookup(symbol);
  if (!address) return fail(ToString(address.takeError()));
  fn->jit_code.store(address->toPtr<JitEntry>(), std::memory_order_release);
  fn->jit_state.store(JitState::kCompiled, std::memory_order_relaxed);

  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ++impl_->stats.compiled;
  impl_->stats.total_ms += ms;
  if (impl_->config.verbose) {
    absl::FPrintF(impl_->config.log, "[jit] compiled %s (%d bytes of bytecode) in %.3fms at %p\n",
                  fn->name, fn->code.size(), ms, address->toPtr<void*>());
  }
  return true;
}

void Jit::CompileAll() {
  for (const auto& fn : impl_->vm->program().functions) Compile(fn.get());
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
