// --perf-map: the Linux perf JIT map (/tmp/perf-PID.map) for compiled code.
//
// perf reads, for a process with anonymous executable memory, the text file
// /tmp/perf-PID.map: one line `START SIZE name` per code range (START and
// SIZE in hex, without 0x), later lines winning where ranges overlap. It is
// the format of Node's --perf-basic-prof and the JVM's perf-map-agent.
// `perf record` needs nothing else; `perf report` reads the map at report
// time, so the file must outlive the process (it is never deleted).
//
// The ranges come from the JIT linker itself (a JITLink plugin): each
// compiled function's symbol, with its final address and size, after
// fixups and before the code can run, so a line is in the file (flushed)
// before the first sample can land in its code. LLVM's PerfSupportPlugin
// was rejected: it writes perf's jitdump format (jit-PID.dump, which needs
// `perf inject`), not the map.
//
// A write that fails (a full disk, --perf-map=/dev/full) loses lines, never
// code: the program goes on, and the loss is reported as every lost output
// is, one line on stderr and exit code 1 at the end (NoteLostOutput,
// vm/runtime/standard_streams.h), since a map with lines missing would have
// perf name those frames wrongly without a word.
#ifndef MINIVM_VM_JIT_PERF_MAP_H_
#define MINIVM_VM_JIT_PERF_MAP_H_

#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h"

namespace minivm::jit {

// Where --perf-map writes by default: /tmp/perf-PID.map, the only place perf
// looks.
std::string DefaultPerfMapPath();

class PerfMapPlugin final : public llvm::orc::ObjectLinkingLayer::Plugin {
 public:
  // Names a linked symbol for the map, or returns "" for a symbol that is not
  // a compiled function (it is then left out).
  using Namer = std::function<std::string(llvm::StringRef symbol)>;

  // Creates (truncates) `path`. FailedPrecondition, naming the path and the
  // reason, if it cannot.
  static absl::StatusOr<std::shared_ptr<PerfMapPlugin>> Open(const std::string& path, Namer namer);
  ~PerfMapPlugin() override;

  void modifyPassConfig(llvm::orc::MaterializationResponsibility& mr, llvm::jitlink::LinkGraph& g,
                        llvm::jitlink::PassConfiguration& config) override;
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility& mr) override;
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib& jd, llvm::orc::ResourceKey key) override;
  void notifyTransferringResources(llvm::orc::JITDylib& jd, llvm::orc::ResourceKey dst_key,
                                   llvm::orc::ResourceKey src_key) override;

 private:
  PerfMapPlugin(std::string path, FILE* file, Namer namer)
      : path_(std::move(path)), file_(file), namer_(std::move(namer)) {}
  // Appends one line per named, non-empty defined symbol of `g`.
  void Record(llvm::jitlink::LinkGraph& g);

  std::mutex mu_;  // one graph's lines at a time (compilations may overlap)
  const std::string path_;
  FILE* const file_;
  bool failed_ = false;  // guarded by mu_: the loss has been reported
  const Namer namer_;
};

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_PERF_MAP_H_
