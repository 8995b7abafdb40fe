// The JIT driver: LLJIT setup, the runtime's symbols, per-function
// compilation at two tiers, the eager compiler threads and the background
// compiler thread.
//
// Design:
// .tiers  Two tiers. The quick tier (--jit=eager: every function before
//    the program starts) runs SROA/mem2reg, so slots live in registers, and
//    LowerSwitch, then fast instruction selection and the fast register
//    allocator (CodeGen at -O0): a small fraction of LLVM's -O2 compile work
//    per function, hotness counting included, for code that runs about
//    twice the instructions of -O2's but keeps its slots out of memory (the
//    figures are in docs/performance.md, "Compile time"). Its hot functions move
//    up (polls.cc .tier-up). The optimising tier (hot functions: --jit=auto's,
//    and eager's tier-up) is --jit-opt. Its default, 2, is a pipeline of our
//    own: SROA turns the slot allocas into registers; EarlyCSE, InstCombine,
//    SimplifyCFG, JumpThreading, CorrelatedValuePropagation and GVN clean up
//    the tag tests and reloads; LICM hoists loop-invariant loads. CodeGen
//    then runs at -O2, on the background thread. Level 1 is the same
//    without JumpThreading, CVP and LICM; 3 is LLVM's standard -O3. Each
//    tier compiles to an object file on the compiling thread with that
//    thread's TargetMachine; LLJIT only links (.eager-threads).
//    Rejected for the optimising tier: LLVM's standard -O2 pipeline, whose
//    inliner, vectorisers, unroller and inter-procedural passes find nothing
//    in a module of functions that call others only through pointers (and
//    themselves directly) and the runtime through external symbols: it costs
//    more compile work for code that runs slightly more instructions; fast
//    instruction selection after our pipeline (cheaper to compile, but code
//    running well over a tenth more instructions); adding DSE, or
//    SimplifyCFG's hoisting and sinking of common instructions (no gain, or
//    worse code).
//    Rejected for the quick tier: LLVM's -O0 pipeline (no SROA: the same
//    compile cost here, because a switch makes fast instruction selection
//    fall back to SelectionDAG, and code that keeps every slot in memory);
//    --jit-opt=1's light pipeline with -O2 instruction selection (most of
//    -O2's cost: instruction selection dominates).
// .groups  Functions are compiled in groups: each is emitted into the
//    group's LLVM module and verified on its own (one that fails is erased
//    again, so a failure stays local to its Function); the module is then
//    optimised and linked into memory in one piece. --jit=auto compiles
//    groups of one (what the queue holds); --jit=eager batches the program
//    (kBatchFunctions functions or kBatchBytecode bytes each), so 100,000
//    functions are a few hundred modules and mappings, not 100,000 (one per
//    function costs milliseconds of fixed work each and exhausts
//    vm.max_map_count above about 33k). Calls between compiled Functions go
//    through Function::jit_code or jit_body (calls.cc .call.real), so
//    functions never reference each other's symbols and a group's
//    optimisation cannot inline across them. The trampolines between the two
//    entries (calls.cc .call.trampolines) are linked once, in Create, before
//    anything is compiled; if they cannot be (a --jit-memory too small for
//    them), every function stays interpreted with that reason. Rejected:
//    emitting each function into its own module and merging with
//    llvm::Linker (the linker re-scans the growing module per merge,
//    quadratic in the group).
// .eager-threads  --jit=eager compiles its batches on every hardware thread
//    (at most kMaxEagerThreads): each thread takes the next batch, emits it
//    into the batch's own LLVMContext, optimises it and generates its object
//    file with its own TargetMachine (neither is thread-safe), then adds the
//    object to the one JITDylib and looks the batch's symbols up, which
//    links it there; batches never reference each other. Links run one at a
//    time (Impl::link_mu), so that a failed link's cause reaches the thread
//    whose batch it was; linking is a small part of a batch's work
//    (emission, the IR pipeline and code generation run in parallel). The
//    cap (.memory-cap) is one atomic counter, so no link can overshoot it.
//    Rejected: LLJIT's own concurrent compilation (ConcurrentIRCompiler on a
//    thread pool), which compiles at one level only and needs lookups issued
//    asynchronously to keep more than one batch in flight.
// .background  One background thread compiles queued Functions in FIFO
//    order (--jit=auto). It never touches the heap (it reads bytecode,
//    inline caches and Klass pointers, none of which move), so it is not a
//    mutator and never takes part in safepoints. Code is published with a
//    release store after LLJIT has materialised it.
// .symbols  Runtime entry points (runtime.h) are absolute symbols in the
//    main JITDylib; nothing else is resolved from the process.
// .linking  JITLink's ObjectLinkingLayer with .eh_frame registration,
//    configured here as LLJIT configures it by default on x86-64 and AArch64
//    (small code model, PIC), so that the JIT's own plugins can see each
//    linked function's final address range (perf_map.h).
// .memory-cap  Code memory is capped (--jit-memory, code_memory.h). A group
//    that does not fit, like any other failure to compile, link or map,
//    leaves its functions interpreted with one line each under
//    --verbose:jit; ORC's own error reports are routed to those lines, not
//    to stderr (no "JIT session error" floods), and once the cap is reached
//    nothing more is compiled.
#include "vm/jit/jit.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/EPCEHFrameRegistrar.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCContext.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SmallVectorMemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Transforms/Scalar/CorrelatedValuePropagation.h"
#include "llvm/Transforms/Scalar/EarlyCSE.h"
#include "llvm/Transforms/Scalar/GVN.h"
#include "llvm/Transforms/Scalar/JumpThreading.h"
#include "llvm/Transforms/Scalar/LICM.h"
#include "llvm/Transforms/Scalar/LoopPassManager.h"
#include "llvm/Transforms/Scalar/SROA.h"
#include "llvm/Transforms/Scalar/SimplifyCFG.h"
#include "llvm/Transforms/Utils/LowerSwitch.h"
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
  for (char c : fn.name)
    s.push_back((std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_');
  return s;
}

// The perf map's name for a linked symbol (SymbolFor's "minivm.INDEX.NAME"):
// `minivm:NAME (FILE:LINE)`, "" for anything else.
std::string PerfMapName(const Program& program, llvm::StringRef symbol) {
  if (!symbol.consume_front("minivm.")) return "";
  if (symbol.starts_with("enter_")) return absl::StrCat("minivm:", symbol.str());
  size_t index = 0;
  if (symbol.consumeInteger(10, index) || index >= program.functions.size()) return "";
  const Function& fn = *program.functions[index];
  return absl::StrCat("minivm:", fn.name, " (", program.path, ":", fn.line, ")");
}

}  // namespace

struct Jit::Impl {
  const VM* vm = nullptr;
  JitConfig config;
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  // Makes the target machines: one per compiling thread and tier, since a
  // TargetMachine is not thread-safe (.eager-threads).
  std::optional<llvm::orc::JITTargetMachineBuilder> machine_builder;

  // Serialises Compile (the --jit=auto path): it owns `optimizing_machine`.
  std::mutex compile_mu;
  std::unique_ptr<llvm::TargetMachine> optimizing_machine;  // guarded by compile_mu

  mutable std::mutex stats_mu;
  Stats stats;  // guarded by stats_mu

  CappedCodeMemory* code_memory = nullptr;  // owned by the linking layer

  // Serialises linking (.eager-threads). ORC reports a failed materialisation
  // twice: through the lookup's result ("failed to materialize symbols")
  // and, with the cause, through the session's error reporter. LLJIT
  // dispatches materialisation in place, but from one queue shared by the
  // session: a thread's lookup may run the link another thread queued, so
  // with concurrent links the cause can reach the wrong thread (a batch
  // refused by the memory cap would be reported as "failed to materialize"
  // and would not stop further compiles). With one link at a time, the cause
  // reported during a lookup is that lookup's.
  std::mutex link_mu;
  std::mutex session_error_mu;  // the reporter may run outside a link
  std::string session_error;    // guarded by session_error_mu

  // A target machine for `tier` (.tiers): instruction selection at -O2
  // for optimised code of --jit-opt 1..3, the fast path otherwise.
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> MakeMachine(Tier tier) const;
  // Compiles the functions of `fns` that are neither compiled nor refused
  // as one group (.groups) at `tier` with `machine`, which the caller owns
  // for the duration. Thread-safe for disjoint groups and machines.
  void CompileGroup(const std::vector<const Function*>& fns, Tier tier,
                    llvm::TargetMachine* machine);
  // Marks `fn` kFailed with one line under --verbose:jit.
  void Refuse(const Function* fn, absl::string_view why);
  // `module` compiled to an object file by `machine`.
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> EmitObject(
      llvm::Module* module, Tier tier, llvm::TargetMachine* machine) const;
  // Links `object`, one link at a time (link_mu), and returns the
  // addresses of `symbols`, or why it failed.
  absl::StatusOr<std::vector<void*>> Link(std::unique_ptr<llvm::MemoryBuffer> object,
                                          const std::vector<std::string>& symbols);
  // Generates and links the trampolines between compiled code's two
  // entries (calls.cc .call.trampolines).
  absl::Status LinkTrampolines();
  // The trampolines by kind and number of register arguments; set once, in
  // Create, before anything is compiled.
  const void* enter_optimised[kMaxRegisterArity + 1] = {};
  const void* enter_quick[kMaxRegisterArity + 1] = {};
  // Why the trampolines could not be linked; nothing is compiled then.
  std::string no_trampolines;
  // Runs `tier`'s IR pipeline over `module`.
  void Optimize(llvm::Module* module, Tier tier, llvm::TargetMachine* machine) const;

  // The background compiler (.background).
  std::mutex queue_mu;
  std::condition_variable queue_cv;
  std::deque<const Function*> queue;  // guarded by queue_mu
  bool stopping = false;              // guarded by queue_mu
  std::thread worker;                 // started by the first OnHot
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
  // What LLJIT sets when it picks JITLink itself (.linking).
  jtmb->setCodeModel(llvm::CodeModel::Small);
  jtmb->setRelocationModel(llvm::Reloc::PIC_);
  impl->machine_builder = *jtmb;
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> tm = impl->MakeMachine(Tier::kOptimized);
  if (!tm) return absl::InternalError(absl::StrCat("JIT: ", ToString(tm.takeError())));
  impl->optimizing_machine = std::move(*tm);

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
  auto create_linking_layer =
      [perf_map, raw_impl](
          llvm::orc::ExecutionSession& es,
          const llvm::Triple&) -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
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
    std::string why = ToString(std::move(e));
    std::lock_guard<std::mutex> lock(raw_impl->session_error_mu);
    raw_impl->session_error = std::move(why);
  });

  llvm::orc::SymbolMap symbols;
  for (const RuntimeSymbol& s : RuntimeSymbols()) {
    symbols[impl->lljit->mangleAndIntern(llvm::StringRef(s.name.data(), s.name.size()))] = {
        llvm::orc::ExecutorAddr::fromPtr(s.address),
        llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  }
  // The one C library function compiled code calls: LLVM lowers the
  // zeroing of an array of variable size (allocation.cc, EmitTlabBump)
  // to memset. The JIT resolves no other process symbols, so a call to
  // anything else fails the link and the function stays interpreted.
  void* (*const memset_fn)(void*, int, size_t) = &std::memset;
  symbols[impl->lljit->mangleAndIntern("memset")] = {
      llvm::orc::ExecutorAddr::fromPtr(memset_fn),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (llvm::Error e = impl->lljit->getMainJITDylib().define(llvm::orc::absoluteSymbols(symbols))) {
    return absl::InternalError(absl::StrCat("JIT: ", ToString(std::move(e))));
  }
  // A --jit-memory too small even for these leaves every function
  // interpreted, with the reason under --verbose:jit (.memory-cap).
  if (absl::Status linked = impl->LinkTrampolines(); !linked.ok()) {
    impl->no_trampolines =
        absl::StrCat("the JIT's trampolines could not be linked: ", linked.message());
  }
  return std::unique_ptr<Jit>(new Jit(std::move(impl)));
}

absl::Status Jit::Impl::LinkTrampolines() {
  llvm::LLVMContext context;
  llvm::Module module("minivm.trampolines", context);
  module.setDataLayout(lljit->getDataLayout());
  module.setTargetTriple(lljit->getTargetTriple().str());
  EmitTrampolines(&module);
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> object =
      EmitObject(&module, Tier::kOptimized, optimizing_machine.get());
  if (!object) return absl::InternalError(ToString(object.takeError()));
  std::vector<std::string> symbols;
  for (Trampoline kind : {Trampoline::kEnterOptimised, Trampoline::kEnterQuick}) {
    for (int n = 0; n <= kMaxRegisterArity; ++n) symbols.push_back(TrampolineSymbol(kind, n));
  }
  absl::StatusOr<std::vector<void*>> addresses = Link(std::move(*object), symbols);
  if (!addresses.ok()) return addresses.status();
  for (int n = 0; n <= kMaxRegisterArity; ++n) {
    enter_optimised[n] = (*addresses)[n];
    enter_quick[n] = (*addresses)[kMaxRegisterArity + 1 + n];
  }
  return absl::OkStatus();
}

Jit::Jit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Jit::~Jit() { StopCompiling(); }

llvm::Expected<std::unique_ptr<llvm::TargetMachine>> Jit::Impl::MakeMachine(Tier tier) const {
  llvm::orc::JITTargetMachineBuilder builder = *machine_builder;
  builder.setCodeGenOptLevel(tier == Tier::kQuick || config.opt_level == 0
                                 ? llvm::CodeGenOptLevel::None
                                 : llvm::CodeGenOptLevel::Default);
  return builder.createTargetMachine();
}

void Jit::Impl::Optimize(llvm::Module* module, Tier tier, llvm::TargetMachine* machine) const {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(machine);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  const int level = config.opt_level;
  if (tier == Tier::kQuick) {
    // The quick tier (.tiers): slots to registers, and switches (the OSR
    // entry's) to branches, which fast instruction selection handles
    // itself; a switch makes it fall back to SelectionDAG for every function.
    llvm::FunctionPassManager fpm;
    fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
    fpm.addPass(llvm::LowerSwitchPass());
    mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
  } else if (level == 0) {
    mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0);
  } else if (level == 1 || level == 2) {
    // The light pipeline (1) and the optimising tier's own (2, the default;
    // .tiers): slots to registers, then the clean-ups that matter for tag
    // tests and reloads, without LLVM's inter-procedural, vectorising and
    // unrolling machinery, which finds nothing in functions that call each
    // other through pointers and the runtime through external symbols.
    // Level 2 adds jump threading and value propagation, which fold a
    // value's tag test when an earlier one on the path already decided it
    // (fib's n after `n < 2`), and LICM for loops' invariant loads.
    llvm::FunctionPassManager fpm;
    fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
    fpm.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
    fpm.addPass(llvm::InstCombinePass());
    fpm.addPass(llvm::SimplifyCFGPass());
    if (level == 2) {
      fpm.addPass(llvm::JumpThreadingPass());
      fpm.addPass(llvm::CorrelatedValuePropagationPass());
    }
    fpm.addPass(llvm::GVNPass());
    fpm.addPass(llvm::InstCombinePass());
    fpm.addPass(llvm::SimplifyCFGPass());
    if (level == 2) {
      fpm.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()),
                                                        /*UseMemorySSA=*/true));
    }
    mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
  } else {  // 3: LLVM's standard pipeline
    mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  }
  mpm.run(*module, mam);
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> Jit::Impl::EmitObject(
    llvm::Module* module, Tier tier, llvm::TargetMachine* machine) const {
  // As ORC's SimpleCompiler, except that the quick tier skips the IR
  // verifier CodeGen would run: each function was verified after emission
  // (CompileGroup), and its pipeline (SROA, LowerSwitch) is LLVM's own.
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  llvm::MCContext* mc = nullptr;
  if (machine->addPassesToEmitMC(passes, mc, stream, /*DisableVerify=*/tier == Tier::kQuick)) {
    return llvm::make_error<llvm::StringError>("the target cannot emit machine code",
                                               llvm::inconvertibleErrorCode());
  }
  passes.run(*module);
  return std::make_unique<llvm::SmallVectorMemoryBuffer>(
      std::move(buffer), module->getModuleIdentifier() + "-jitted-objectbuffer",
      /*RequiresNullTerminator=*/false);
}

bool Jit::Compile(const Function* fn) {
  std::lock_guard<std::mutex> lock(impl_->compile_mu);
  impl_->CompileGroup({fn}, Tier::kOptimized, impl_->optimizing_machine.get());
  return fn->jit_code.load(std::memory_order_acquire) != nullptr;
}

void Jit::CompileAll() {
  std::vector<std::vector<const Function*>> batches(1);
  size_t bytes = 0;
  for (const auto& fn : impl_->vm->program().functions) {
    if (batches.back().size() >= kBatchFunctions || bytes >= kBatchBytecode) {
      batches.emplace_back();
      bytes = 0;
    }
    batches.back().push_back(fn.get());
    bytes += fn->code.size();
  }
  // .eager-threads: every thread, this one included, takes the next batch until
  // none is left. A thread that cannot make its target machine compiles
  // nothing; the others take its share, and if none can, the functions stay
  // interpreted with the reason.
  std::atomic<size_t> next{0};
  std::mutex machine_error_mu;
  std::string machine_error;  // guarded by machine_error_mu
  auto compile_batches = [&] {
    llvm::Expected<std::unique_ptr<llvm::TargetMachine>> machine = impl_->MakeMachine(Tier::kQuick);
    if (!machine) {
      std::lock_guard<std::mutex> lock(machine_error_mu);
      machine_error = ToString(machine.takeError());
      return;
    }
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < batches.size();) {
      impl_->CompileGroup(batches[i], Tier::kQuick, machine->get());
    }
  };
  const size_t threads = std::min<size_t>(
      {batches.size(), kMaxEagerThreads, std::max<size_t>(1, std::thread::hardware_concurrency())});
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < threads; ++i) helpers.emplace_back(compile_batches);
  compile_batches();
  for (std::thread& helper : helpers) helper.join();
  for (size_t i = next.load(std::memory_order_relaxed); i < batches.size(); ++i) {
    for (const Function* fn : batches[i]) impl_->Refuse(fn, machine_error);
  }
}

void Jit::Impl::Refuse(const Function* fn, absl::string_view why) {
  fn->jit_state.store(JitState::kFailed, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(stats_mu);
    ++stats.failed;
  }
  if (config.verbose) {
    if (fn->jit_code.load(std::memory_order_relaxed) != nullptr) {
      absl::FPrintF(config.log, "[jit] %s: not optimised, stays at the quick tier: %s\n", fn->name,
                    why);
    } else {
      absl::FPrintF(config.log, "[jit] %s: not compiled, stays interpreted: %s\n", fn->name, why);
    }
  }
}

void Jit::Impl::CompileGroup(const std::vector<const Function*>& fns, Tier tier,
                             llvm::TargetMachine* machine) {
  const auto start = std::chrono::steady_clock::now();
  auto context = std::make_unique<llvm::LLVMContext>();
  auto group = std::make_unique<llvm::Module>(SymbolFor(*fns.front()), *context);
  group->setDataLayout(lljit->getDataLayout());
  group->setTargetTriple(lljit->getTargetTriple().str());
  std::vector<std::pair<const Function*, std::string>> members;
  std::vector<std::vector<InlinedCall>> members_inlined;  // by member, for --verbose:jit
  for (const Function* fn : fns) {
    // Compiled already at this tier or above (a quick function reported
    // hot is kQueued, not kQuick, by now).
    if (tier == Tier::kQuick
            ? fn->jit_code.load(std::memory_order_acquire) != nullptr
            : fn->jit_state.load(std::memory_order_relaxed) == JitState::kCompiled) {
      continue;
    }
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
    if (!no_trampolines.empty()) {
      Refuse(fn, no_trampolines);
      continue;
    }
    // .memory-cap: once a group has been refused, nothing more is compiled.
    if (code_memory != nullptr && code_memory->refused()) {
      Refuse(fn, absl::StrCat("JIT memory limit reached (--jit-memory=", config.memory_limit,
                              " bytes)"));
      continue;
    }
    // Emitted straight into the group's module; a function that fails is
    // erased again, leaving the others (and the shared declarations of the
    // runtime entry points) intact.
    // A tier-up's code is a second definition for the function: ".opt"
    // keeps the symbols apart (no sanitised name contains a dot).
    std::string symbol = SymbolFor(*fn);
    if (fn->jit_code.load(std::memory_order_relaxed) != nullptr) symbol += ".opt";
    std::vector<InlinedCall> inlined;
    absl::Status emitted = EmitFunction(*vm, *fn, symbol, group.get(),
                                        tier == Tier::kQuick ? config.threshold : 0, &inlined);
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
  Optimize(group.get(), tier, machine);
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
  // Code generation on this thread with this thread's machine (.eager-threads),
  // then one link of the object file: the first lookup links and maps the
  // whole group, and one lookup of all its symbols costs one session round
  // trip (a lookup per function would cost one each).
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> object =
      EmitObject(group.get(), tier, machine);
  if (!object) return refuse_all(ToString(object.takeError()));
  group.reset();
  context.reset();
  std::vector<std::string> symbols;
  for (const auto& member : members) symbols.push_back(member.second);
  absl::StatusOr<std::vector<void*>> addresses = Link(std::move(*object), symbols);
  if (!addresses.ok()) return refuse_all(addresses.status().message());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.compiled += members.size();
    stats.total_ms += ms;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    const Function* fn = members[i].first;
    const bool tier_up = fn->jit_code.load(std::memory_order_relaxed) != nullptr;
    // calls.cc .call.trampolines: each entry is published after the one its trampoline reads.
    void* const code = (*addresses)[i];
    if (tier == Tier::kQuick) {
      fn->jit_code.store(reinterpret_cast<JitEntry>(code), std::memory_order_release);
      fn->jit_body.store(enter_quick[RegisterArgs(fn->arity)], std::memory_order_release);
    } else {
      fn->jit_body.store(code, std::memory_order_release);
      fn->jit_code.store(reinterpret_cast<JitEntry>(enter_optimised[RegisterArgs(fn->arity)]),
                         std::memory_order_release);
    }
    fn->jit_state.store(tier == Tier::kQuick ? JitState::kQuick : JitState::kCompiled,
                        std::memory_order_relaxed);
    if (config.verbose) {
      // A group's time is shared out evenly among its functions.
      absl::FPrintF(config.log, "[jit] %s %s (%d bytes of bytecode) in %.3fms at %p\n",
                    tier_up ? "optimised" : "compiled", fn->name, fn->code.size(),
                    ms / static_cast<double>(members.size()), (*addresses)[i]);
      for (const InlinedCall& call : members_inlined[i]) {
        absl::FPrintF(config.log, "[jit] %s: inlined %s (line %d%s)\n", fn->name, call.callee->name,
                      call.line,
                      call.caller == nullptr ? "" : absl::StrCat(", in ", call.caller->name));
      }
    }
  }
}

absl::StatusOr<std::vector<void*>> Jit::Impl::Link(std::unique_ptr<llvm::MemoryBuffer> object,
                                                   const std::vector<std::string>& symbols) {
  std::lock_guard<std::mutex> link_lock(link_mu);
  {
    std::lock_guard<std::mutex> lock(session_error_mu);
    session_error.clear();
  }
  if (llvm::Error e = lljit->addObjectFile(std::move(object))) {
    return absl::InternalError(ToString(std::move(e)));
  }
  llvm::orc::SymbolLookupSet wanted;
  for (const std::string& symbol : symbols) wanted.add(lljit->mangleAndIntern(symbol));
  llvm::orc::JITDylib& dylib = lljit->getMainJITDylib();
  llvm::Expected<llvm::orc::SymbolMap> found = lljit->getExecutionSession().lookup(
      llvm::orc::makeJITDylibSearchOrder(&dylib, llvm::orc::JITDylibLookupFlags::MatchAllSymbols),
      std::move(wanted));
  if (!found) {
    std::string why = ToString(found.takeError());
    std::lock_guard<std::mutex> lock(session_error_mu);
    // The cause, not "failed to materialize".
    return absl::InternalError(session_error.empty() ? why : session_error);
  }
  std::vector<void*> addresses;
  for (const std::string& symbol : symbols) {
    addresses.push_back((*found)[lljit->mangleAndIntern(symbol)].getAddress().toPtr<void*>());
  }
  return addresses;
}

void Jit::OnHot(VMThread* t, const Function* fn) {
  // From the interpreter (kInterpreted) or from quick-tier code (kQuick).
  JitState expected = JitState::kInterpreted;
  if (!fn->jit_state.compare_exchange_strong(expected, JitState::kQueued,
                                             std::memory_order_relaxed) &&
      !(expected == JitState::kQuick &&
        fn->jit_state.compare_exchange_strong(expected, JitState::kQueued,
                                              std::memory_order_relaxed))) {
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
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
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
