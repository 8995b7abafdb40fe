// The JIT's code memory: JITLink's in-process memory manager under a cap.
//
// Every linked graph (one per LLVM module: a batch of functions under
// --jit=eager, one function under --jit=auto) gets one mapping from the
// inner manager, sized as that manager lays it out (page-rounded
// segments). Before delegating, the graph's size is charged against the
// cap (--jit-memory); a graph that does not fit is refused with an error
// the JIT reports as the reason its functions stay interpreted. Memory is
// never returned: compiled code lives as long as the VM.
#ifndef MINIVM_VM_JIT_CODE_MEMORY_H_
#define MINIVM_VM_JIT_CODE_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "llvm/ExecutionEngine/JITLink/JITLinkMemoryManager.h"

namespace minivm::jit {

class CappedCodeMemory final : public llvm::jitlink::JITLinkMemoryManager {
 public:
  // The in-process manager capped at `limit` bytes.
  static llvm::Expected<std::unique_ptr<CappedCodeMemory>> Create(uint64_t limit);

  void allocate(const llvm::jitlink::JITLinkDylib* jd, llvm::jitlink::LinkGraph& g,
                OnAllocatedFunction on_allocated) override;
  using JITLinkMemoryManager::allocate;
  void deallocate(std::vector<FinalizedAlloc> allocs,
                  OnDeallocatedFunction on_deallocated) override;
  using JITLinkMemoryManager::deallocate;

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // Whether a graph has been refused for want of room under the cap.
  bool refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  CappedCodeMemory(std::unique_ptr<llvm::jitlink::JITLinkMemoryManager> inner, uint64_t page_size,
                   uint64_t limit)
      : inner_(std::move(inner)), page_size_(page_size), limit_(limit) {}

  const std::unique_ptr<llvm::jitlink::JITLinkMemoryManager> inner_;
  const uint64_t page_size_;
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};  // bytes charged by successful allocations
  std::atomic<bool> refused_{false};
};

}  // namespace minivm::jit

#endif  // MINIVM_VM_JIT_CODE_MEMORY_H_
