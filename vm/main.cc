// minivm: parse the command line, compile the program, run it.
//
// Exit codes (docs/language.md): 0 main returned, 1 runtime error (also:
// lost output, no address space for the heap or main's stacks, an agent
// that failed), 2 compile error or bad command line, n exit(n), 130/143/131
// SIGINT/SIGTERM/SIGQUIT (a SIGQUIT that is not an attach request); SIGPIPE
// ends nothing (vm/runtime/signal_dispatcher.h). Once the VM runs, the process ends through
// VM::ExitProcess or VM::Shutdown (flush, _exit) so that threads still
// running are simply stopped, as in Go, and no static destructor runs under
// them.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "agent_api/attach_host.h"
#include "agent_api/tool_interface.h"
#include "base/sync_setup.h"
#include "vm/bytecode/disassembler.h"
#include "vm/compiler/compiler.h"
#include "vm/jit/jit.h"
#include "vm/runtime/attach_listener.h"
#include "vm/runtime/options.h"
#include "vm/runtime/signal_dispatcher.h"
#include "vm/runtime/standard_streams.h"
#include "vm/runtime/version.h"
#include "vm/runtime/vm.h"

namespace {

int Fail(absl::string_view message, int code = 2) {
  std::fprintf(stderr, "minivm: error: %.*s\n", static_cast<int>(message.size()), message.data());
  return code;
}

// The program's source, or why it cannot be read (one line, docs/architecture.md
// "Error handling").
absl::StatusOr<std::string> ReadProgram(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot read '", path, "': ", std::strerror(errno)));
  }
  std::string contents;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) contents.append(buf, n);
  const int read_errno = std::ferror(f) != 0 ? errno : 0;
  std::fclose(f);
  if (read_errno != 0) {
    return absl::DataLossError(
        absl::StrCat("cannot read '", path, "': ", std::strerror(read_errno)));
  }
  return contents;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists and before any lock is taken (base/sync_setup.h).
  minivm::base::InitSynchronization();
  minivm::OccupyClosedStandardFds();
  // While this is the only thread: every thread made later inherits the
  // signal mask (vm/runtime/signal_dispatcher.h).
  minivm::StartSignalDispatcher();
  absl::StatusOr<minivm::Options> options = minivm::ParseOptions(argc, argv);
  if (!options.ok()) return Fail(options.status().message());
  if (options->help) {
    std::fputs(minivm::UsageText().c_str(), stdout);
    return minivm::FinishStandardStreams(stdout, stderr, 0);
  }
  if (options->version) {
    std::printf("%s\n", minivm::VersionString());
    return minivm::FinishStandardStreams(stdout, stderr, 0);
  }

  absl::StatusOr<std::string> source = ReadProgram(options->program_path);
  if (!source.ok()) return Fail(source.status().message());
  minivm::CompileResult compiled = minivm::Compile(options->program_path, *source);
  if (!compiled.errors.empty() || compiled.program == nullptr) {
    for (const minivm::Diagnostic& d : compiled.errors) {
      std::fprintf(stderr, "%s\n", minivm::FormatDiagnostic(options->program_path, d).c_str());
    }
    return 2;
  }
  if (options->disassemble) {
    std::fputs(minivm::Disassemble(*compiled.program).c_str(), stdout);
    return minivm::FinishStandardStreams(stdout, stderr, 0);
  }

  // Agents load after the program compiled (a program with errors never
  // starts the VM) and before the VM exists (phase ONLOAD).
  std::unique_ptr<minivm::agent::ToolInterface> tools;
  if (!options->agents.empty()) {
    tools = std::make_unique<minivm::agent::ToolInterface>();
    if (absl::Status loaded = tools->LoadAgents(options->agents); !loaded.ok()) {
      std::fprintf(stderr, "minivm: error: %.*s\n", static_cast<int>(loaded.message().size()),
                   loaded.message().data());
      // A malformed -agentpath/-agentlib is a bad command line.
      return loaded.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
  }

  minivm::VmOptions vm_options;
  vm_options.heap.max_heap_bytes = options->heap_bytes;
  vm_options.heap.young_bytes = options->young_bytes;
  vm_options.heap.verbose_gc = options->verbose_gc;
  vm_options.heap.verify_heap = options->verify_heap;
  vm_options.heap.gc_stress_every = options->gc_stress;
  vm_options.heap.sampler_seed = options->seed;
  vm_options.heap.fixed_tlab_bytes = options->tlab_bytes;
  vm_options.seed = options->seed;
  vm_options.stack_depth = options->stack_depth;
  vm_options.program_args = options->program_args;
  vm_options.exit_process = true;
  absl::StatusOr<std::unique_ptr<minivm::VM>> vm =
      minivm::VM::Create(std::move(compiled.program), std::move(vm_options));
  // Out of address space (heap, stacks) is not a bad command line: exit 1.
  if (!vm.ok()) {
    return Fail(vm.status().message(),
                vm.status().code() == absl::StatusCode::kResourceExhausted ? 1 : 2);
  }
  if (tools != nullptr) tools->AttachVm(vm->get());
  if (options->jit != minivm::JitMode::kOff) {
    minivm::jit::JitConfig jit_config;
    jit_config.mode = options->jit;
    jit_config.sync = options->jit_sync;
    jit_config.opt_level = options->jit_opt_level;
    jit_config.verbose = options->verbose_jit;
    jit_config.print = options->print_jit;
    jit_config.print_only = options->print_jit_only;
    jit_config.perf_map = options->perf_map;
    jit_config.memory_limit = options->jit_memory;
    jit_config.threshold = options->jit_threshold;
    absl::StatusOr<std::unique_ptr<minivm::jit::Jit>> jit =
        minivm::jit::Jit::Create(vm->get(), jit_config);
    // A --perf-map file that cannot be written is an option that cannot be
    // honoured on this machine (1, docs/language.md); anything else, 2.
    if (!jit.ok()) {
      return Fail(jit.status().message(),
                  jit.status().code() == absl::StatusCode::kFailedPrecondition ? 1 : 2);
    }
    // --jit=eager: every function is compiled before the program starts.
    if (options->jit == minivm::JitMode::kEager) (*jit)->CompileAll();
    (*vm)->InstallJit(*std::move(jit), options->jit_threshold);
  }
  // From here on the VM is never destroyed: the process ends with _exit,
  // also when an agent calls exit() (after the JIT's creation, so that its
  // handler runs before LLVM's statics are destroyed).
  (*vm)->EndProcessOnExit();
  // Attach (docs/attach.md) costs nothing until a client asks: this only
  // records where requests go. The host lives as long as the process.
  minivm::ConfigureAttach(vm->get(), new minivm::agent::AttachHost(vm->get(), tools.get()));
  minivm::SetSignalTarget(vm->get());
  const int code = (*vm)->Run();
  (*vm)->ExitProcess(code);
}
