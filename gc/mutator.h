// The GC's view of one VM thread.
//
// The VM embeds a Mutator at offset 0 of its thread object, so the thread
// pointer that the interpreter and compiled code pass around is also the
// Mutator pointer: the TLAB, the safepoint poll word and the card table are
// one load away from it (compiled code never uses thread_local; see
// docs/architecture.md).
#ifndef MINIVM_GC_MUTATOR_H_
#define MINIVM_GC_MUTATOR_H_

#include <atomic>
#include <cstdint>

#include "gc/tlab.h"

namespace minivm::gc {

class Heap;

struct Mutator {
  // Offset 0: the JIT's inline allocation sequence depends on it.
  Tlab tlab;

  // Nonzero when a safepoint or a handshake is pending: the thread must call
  // Heap::SafepointPoll at its next poll site (back-edges, calls, allocation
  // slow paths). Written by the thread that requests the safepoint.
  std::atomic<uint32_t> poll{0};

  // Card table biased so that the card of address `a` is
  // card_table_biased[a >> kCardShift]. Constant for the heap's lifetime.
  uint8_t* card_table_biased = nullptr;

  Heap* heap = nullptr;

  // Owned by the heap (thread registry, safepoint state, TLAB sizing, sampler
  // state). Opaque to the VM.
  void* gc_private = nullptr;

  // The thread's index in spawn order (0 = main), set by the VM before
  // AttachMutator: it seeds the thread's sampler stream with --seed.
  uint64_t thread_index = 0;
};

}  // namespace minivm::gc

#endif  // MINIVM_GC_MUTATOR_H_
