#include "vm/runtime/thread.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "gc/allocation.h"
#include "vm/runtime/builtin_classes.h"

namespace minivm {
namespace {

// Address space only (MAP_NORESERVE): pages cost memory once touched. Fails
// when the address space, or `ulimit -v`, has no room left.
absl::StatusOr<void*> Reserve(size_t bytes, const char* what, const std::string& thread) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int error = errno;
    return absl::ResourceExhaustedError(absl::StrCat("cannot reserve ", bytes, " bytes for the ",
                                                     what, " of thread ", thread, ": ",
                                                     std::strerror(error)));
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

VMThread::VMThread(VM* vm_in, int index_in, std::string name_in, Rng rng_in)
    : vm(vm_in), index(index_in), name(std::move(name_in)), rng(rng_in) {}

absl::StatusOr<std::unique_ptr<VMThread>> VMThread::Create(VM* vm, int index, std::string name,
                                                           size_t stack_depth, Rng rng) {
  auto t = std::unique_ptr<VMThread>(new VMThread(vm, index, std::move(name), rng));
  // Room for the deepest allowed recursion with frames of up to 256 slots
  // (locals plus operand stack); only the touched pages cost memory
  // (MAP_NORESERVE). Wider frames that recurse that deep hit `stack
  // overflow` at a frame entry. Saturating: a depth near SIZE_MAX must not
  // wrap to a small stack.
  const size_t depth = std::max<size_t>(stack_depth, 1);
  size_t slots = depth > kMaxValueStackSlots / kTypicalFrameSlots ? kMaxValueStackSlots
                                                                  : depth * kTypicalFrameSlots;
  slots = std::clamp(slots, kMinValueStackSlots, kMaxValueStackSlots);
  if (depth > SIZE_MAX / sizeof(Frame)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve a frame stack of ", depth, " frames for thread ", t->name));
  }
  absl::StatusOr<void*> stack = Reserve(slots * sizeof(gc::Value), "value stack", t->name);
  if (!stack.ok()) return stack.status();
  t->stack_bytes = slots * sizeof(gc::Value);  // ~VMThread unmaps what is recorded
  t->stack_begin = static_cast<gc::Value*>(*stack);
  t->stack_end = t->stack_begin + slots;
  t->sp = t->stack_begin;
  absl::StatusOr<void*> frames = Reserve(depth * sizeof(Frame), "frame stack", t->name);
  if (!frames.ok()) return frames.status();
  t->frames_bytes = depth * sizeof(Frame);
  t->frames_begin = static_cast<Frame*>(*frames);
  t->frames_end = t->frames_begin + depth;
  t->fp = t->frames_begin - 1;
  return t;
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

ReportedTrace VMThread::StackTrace(const Program& program, size_t inner_frames,
                                   size_t outer_frames) const {
  ReportedTrace trace;
  if (frames_begin == nullptr) return trace;  // finished
  auto entry = [&program](const Frame* f) {
    StackTraceEntry e;
    const Function* fn = f->fn;
    e.function = fn->index == program.init_function ? "<globals>" : fn->name;
    e.bytecode_offset = static_cast<uint32_t>(f->pc() - fn->code.data());
    e.line = fn->lines.LineFor(e.bytecode_offset);
    return e;
  };
  // Only the frames shown are looked at: a million-frame overflow costs
  // what a 60-frame one does.
  const size_t depth = static_cast<size_t>(fp - frames_begin + 1);
  const bool elide = depth > inner_frames + outer_frames;
  const size_t inner = elide ? inner_frames : depth;
  for (size_t i = 0; i < inner; ++i) trace.frames.push_back(entry(fp - i));
  if (elide) {
    trace.omitted = depth - inner_frames - outer_frames;
    for (size_t i = outer_frames; i > 0; --i) {
      trace.frames.push_back(entry(frames_begin + i - 1));
    }
  }
  return trace;
}

}  // namespace minivm
