#include "vm/runtime/thread.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "vm/runtime/builtin_classes.h"

namespace minivm {
namespace {

void* ReserveOrDie(size_t bytes, const char* what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "minivm: fatal: cannot reserve %zu bytes for a %s\n", bytes, what);
    std::abort();
  }
  return p;
}

// Native stack kept free below the limit: room for the interpreter, a
// built-in, the runtime's slow paths (a collection, an agent callback with
// its stack walk) after the last compiled frame. Sanitizer builds use far
// bigger frames, so they keep a quarter of the stack.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
constexpr size_t kNativeStackReserve = size_t{512} << 10;

}  // namespace

void VMThread::SetNativeStackLimit() {
  pthread_attr_t attr;
  void* low = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &low, &size);
    pthread_attr_destroy(&attr);
  }
  const size_t reserve = kSanitized ? size / 4 : kNativeStackReserve;
  if (low == nullptr || size < 2 * reserve) {
    // Unknown or tiny stack: never enter compiled code from this thread.
    native_stack_limit = UINTPTR_MAX;
    return;
  }
  native_stack_limit = reinterpret_cast<uintptr_t>(low) + reserve;
}

VMThread::VMThread(VM* vm_in, int index_in, std::string name_in, size_t stack_depth, Rng rng_in)
    : vm(vm_in), index(index_in), name(std::move(name_in)), rng(rng_in) {
  // Room for the deepest allowed recursion with frames of up to 256 slots
  // (locals plus operand stack); only the touched pages cost memory
  // (MAP_NORESERVE). Wider frames that recurse that deep hit `stack
  // overflow` at a frame entry.
  size_t slots = std::max(kMinValueStackSlots, stack_depth * kTypicalFrameSlots);
  slots = std::min(slots, kMaxValueStackSlots);
  stack_bytes = slots * sizeof(gc::Value);
  stack_begin = static_cast<gc::Value*>(ReserveOrDie(stack_bytes, "value stack"));
  stack_end = stack_begin + slots;
  sp = stack_begin;
  frames_bytes = std::max<size_t>(stack_depth, 1) * sizeof(Frame);
  frames_begin = static_cast<Frame*>(ReserveOrDie(frames_bytes, "frame stack"));
  frames_end = frames_begin + std::max<size_t>(stack_depth, 1);
  fp = frames_begin - 1;
}

VMThread::~VMThread() { ReleaseStacks(); }

void VMThread::ReleaseStacks() {
  if (stack_begin != nullptr) munmap(stack_begin, stack_bytes);
  if (frames_begin != nullptr) munmap(frames_begin, frames_bytes);
  stack_begin = stack_end = sp = nullptr;
  frames_begin = frames_end = fp = nullptr;
}

gc::Object* VMThread::Allocate(const Klass* klass, size_t size, uint64_t length) {
  if (size > gc::kMaxObjectSize) {
    Raise(ErrorKind::kHeapExhausted, absl::StrCat("cannot allocate ", size, " bytes"));
    return nullptr;
  }
  gc::Object* o = gc::Allocate(&mutator, klass, size, length);
  if (o == nullptr) {
    Raise(ErrorKind::kHeapExhausted, absl::StrCat("cannot allocate ", size, " bytes"));
  }
  return o;
}

gc::Object* VMThread::AllocateArray(const Klass* klass, uint64_t length) {
  // 128-bit so that a huge length reports its true size instead of wrapping.
  absl::uint128 size = klass->kind == gc::LayoutKind::kRefArray
                           ? absl::uint128(gc::kArrayHeaderSize) + absl::uint128(length) * 8
                           : (absl::uint128(gc::kArrayHeaderSize) + length + 7) & ~absl::uint128(7);
  if (size > gc::kMaxObjectSize) {
    std::ostringstream bytes;
    bytes << size;
    Raise(ErrorKind::kHeapExhausted, absl::StrCat("cannot allocate ", bytes.str(), " bytes"));
    return nullptr;
  }
  return Allocate(klass, static_cast<size_t>(size), length);
}

std::vector<StackTraceEntry> VMThread::StackTrace(const Program& program) const {
  std::vector<StackTraceEntry> trace;
  if (frames_begin == nullptr) return trace;  // finished
  for (const Frame* f = fp; f >= frames_begin; --f) {
    StackTraceEntry e;
    const Function* fn = f->fn;
    e.function = fn->index == program.init_function ? "<globals>" : fn->name;
    e.bytecode_offset = static_cast<uint32_t>(f->pc - fn->code.data());
    e.line = fn->lines.LineFor(e.bytecode_offset);
    trace.push_back(std::move(e));
  }
  return trace;
}

}  // namespace minivm
