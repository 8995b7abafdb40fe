#include "vm/jit/code_memory.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "llvm/ExecutionEngine/JITLink/JITLink.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/Process.h"

namespace minivm::jit {

llvm::Expected<std::unique_ptr<CappedCodeMemory>> CappedCodeMemory::Create(uint64_t limit) {
  llvm::Expected<std::unique_ptr<llvm::jitlink::InProcessMemoryManager>> inner =
      llvm::jitlink::InProcessMemoryManager::Create();
  if (!inner) return inner.takeError();
  llvm::Expected<unsigned> page_size = llvm::sys::Process::getPageSize();
  if (!page_size) return page_size.takeError();
  return std::unique_ptr<CappedCodeMemory>(
      new CappedCodeMemory(std::move(*inner), *page_size, limit));
}

void CappedCodeMemory::allocate(const llvm::jitlink::JITLinkDylib* jd, llvm::jitlink::LinkGraph& g,
                                OnAllocatedFunction on_allocated) {
  // The size the inner manager will map for this graph (it lays the graph
  // out the same way).
  llvm::jitlink::BasicLayout layout(g);
  llvm::Expected<llvm::jitlink::BasicLayout::ContiguousPageBasedLayoutSizes> sizes =
      layout.getContiguousPageBasedLayoutSizes(page_size_);
  if (!sizes) return on_allocated(sizes.takeError());
  const uint64_t size = sizes->total();
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used + size > limit_) {
      refused_.store(true, std::memory_order_relaxed);
      return on_allocated(llvm::make_error<llvm::StringError>(
          absl::StrCat("JIT memory limit reached (--jit-memory=", limit_, " bytes, ", used,
                       " in use, ", size, " more needed)"),
          llvm::inconvertibleErrorCode()));
    }
  } while (!used_.compare_exchange_weak(used, used + size, std::memory_order_relaxed));
  inner_->allocate(
      jd, g, [this, size, on_allocated = std::move(on_allocated)](AllocResult result) mutable {
        if (!result) used_.fetch_sub(size, std::memory_order_relaxed);
        on_allocated(std::move(result));
      });
}

void CappedCodeMemory::deallocate(std::vector<FinalizedAlloc> allocs,
                                  OnDeallocatedFunction on_deallocated) {
  // Not charged back: the VM never removes code, so this runs only when the
  // JIT itself is destroyed.
  inner_->deallocate(std::move(allocs), std::move(on_deallocated));
}

}  // namespace minivm::jit
