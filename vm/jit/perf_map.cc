#include "vm/jit/perf_map.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/ExecutionEngine/JITLink/JITLink.h"
#include "vm/runtime/standard_streams.h"

namespace minivm::jit {

std::string DefaultPerfMapPath() { return absl::StrCat("/tmp/perf-", getpid(), ".map"); }

absl::StatusOr<std::shared_ptr<PerfMapPlugin>> PerfMapPlugin::Open(const std::string& path,
                                                                   Namer namer) {
  FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--perf-map: cannot write '", path, "': ", std::strerror(errno)));
  }
  return std::shared_ptr<PerfMapPlugin>(new PerfMapPlugin(path, file, std::move(namer)));
}

PerfMapPlugin::~PerfMapPlugin() { std::fclose(file_); }

void PerfMapPlugin::modifyPassConfig(llvm::orc::MaterializationResponsibility& /*mr*/,
                                     llvm::jitlink::LinkGraph& /*g*/,
                                     llvm::jitlink::PassConfiguration& config) {
  // After fixups every address is final, and the code cannot run yet.
  config.PostFixupPasses.push_back([this](llvm::jitlink::LinkGraph& g) {
    Record(g);
    return llvm::Error::success();
  });
}

void PerfMapPlugin::Record(llvm::jitlink::LinkGraph& g) {
  std::lock_guard<std::mutex> lock(mu_);
  errno = 0;
  bool wrote = false;
  for (llvm::jitlink::Symbol* sym : g.defined_symbols()) {
    if (!sym->hasName() || sym->getSize() == 0) continue;
    const std::string name = namer_(sym->getName());
    if (name.empty()) continue;
    absl::FPrintF(file_, "%x %x %s\n", sym->getAddress().getValue(), sym->getSize(), name);
    wrote = true;
  }
  // A perf running meanwhile (or reporting right after a crash) sees every
  // line written so far. A write error (disk full) loses lines, never code,
  // and is reported at the end (see the file comment).
  if (!wrote) return;
  const int flushed = std::fflush(file_);
  if ((flushed != 0 || std::ferror(file_) != 0) && !failed_) {
    failed_ = true;
    NoteLostOutput(absl::StrCat("--perf-map: cannot write '", path_,
                                "': ", std::strerror(errno != 0 ? errno : EIO)));
  }
}

llvm::Error PerfMapPlugin::notifyFailed(llvm::orc::MaterializationResponsibility& /*mr*/) {
  return llvm::Error::success();
}

// Code is never removed (compiled functions live as long as the VM), so no
// line ever goes stale.
llvm::Error PerfMapPlugin::notifyRemovingResources(llvm::orc::JITDylib& /*jd*/,
                                                   llvm::orc::ResourceKey /*key*/) {
  return llvm::Error::success();
}

void PerfMapPlugin::notifyTransferringResources(llvm::orc::JITDylib& /*jd*/,
                                                llvm::orc::ResourceKey /*dst_key*/,
                                                llvm::orc::ResourceKey /*src_key*/) {}

}  // namespace minivm::jit
