// Loads and stores of heap and global slots that other threads can see.
//
// The language has no locks, so a program may race on globals, fields and
// elements. The VM must stay memory-safe however a program races:
// .no-tearing  No torn values: each slot is one aligned 64-bit (or 8-bit) atomic.
// .publication  Safe publication: a thread that loads a reference must see the
//     referenced object's initialisation (its class pointer and length), or
//     it could read a garbage class pointer. Stores of Values into shared
//     slots are release, loads acquire, so object initialisation (done
//     before the first store of its reference) happens-before any use.
// On x86-64 both compile to plain moves, so the interpreter's fast paths
// are unchanged; on AArch64 they are stlr/ldar. They also make racy
// programs well-defined C++, so ThreadSanitizer reports only the VM's own
// races, never the program's. Thread-private slots (locals, the operand
// stack) use plain accesses.
#ifndef MINIVM_VM_RUNTIME_SHARED_SLOTS_H_
#define MINIVM_VM_RUNTIME_SHARED_SLOTS_H_

#include <atomic>
#include <cstdint>

#include "gc/object.h"

namespace minivm {

inline gc::Value LoadShared(const gc::Value* slot) {
  return std::atomic_ref<gc::Value>(*const_cast<gc::Value*>(slot))
      .load(std::memory_order_acquire);
}

inline void StoreShared(gc::Value* slot, gc::Value v) {
  std::atomic_ref<gc::Value>(*slot).store(v, std::memory_order_release);
}

// Bytes hold no references, so a relaxed byte access suffices.
inline uint8_t LoadSharedByte(const uint8_t* p) {
  return std::atomic_ref<uint8_t>(*const_cast<uint8_t*>(p)).load(std::memory_order_relaxed);
}

inline void StoreSharedByte(uint8_t* p, uint8_t b) {
  std::atomic_ref<uint8_t>(*p).store(b, std::memory_order_relaxed);
}

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_SHARED_SLOTS_H_
