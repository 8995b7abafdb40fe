// VMThread: one language thread — its Mutator, value stack, frames, PRNG and
// pending error.
//
// Design (what the GC, the sampler, agents and the JIT rely on):
//
//  1. The gc::Mutator is the first member, so a VMThread* is a gc::Mutator*
//     (static_assert below). Compiled code passes that one pointer around.
//  2. Values live on a VM-managed stack, a contiguous array reserved with
//     mmap(MAP_NORESERVE): frame slots are [base, base + num_locals) followed
//     by the operand stack. `sp` is the PRECISE top: the GC scans
//     [stack_begin, sp) (VM::VisitMutatorRoots), but for the slots a frame's
//     int mask names (5. below). The interpreter keeps
//     sp and pc in registers and writes them back (sp here, pc into the top
//     frame) before anything that can allocate, collect or stop the thread.
//     Nothing above sp is ever scanned, so stale slots there are harmless.
//     Compiled code writes sp and fp at those points only, not at its calls
//     and returns (vm/jit/frames.cc .frame.lazy): both are exact
//     wherever the thread can be looked at (by itself at such a point, by
//     another thread while it is stopped at one), and may be stale between.
//  3. Frames are a separate array (not interleaved with values), so a stack
//     walk for a trace or an agent's GetStackTrace needs no knowledge of the
//     value layout. A frame's pc is the start of the instruction it is at: for
//     the top frame the faulting/polling instruction, for callers their CALL.
//  4. Calls never recurse natively: CALL pushes a Frame, RETURN pops one, so a
//     program cannot overflow the native stack. Depth is bounded by
//     --stack-depth frames and by the value stack's size; both raise
//     `stack overflow`.
//  5. A frame's int mask. Compiled code at a call does not write home the
//     slots it has proven to hold ints (vm/jit/frames.cc .frame.int-mask):
//     their homes may hold anything, a stale reference included, so the GC
//     must not read them. The call says which in the top 16 bits of the
//     frame's pc word, one bit per slot [base, base + 16), with the pc in
//     the low 48 (user addresses are below 2^47 on the targets the JIT
//     runs on; the JIT checks). The mask is written with the pc at the
//     call and is true while the frame is there, whichever tier then runs
//     it: the slots are ints on every path to that instruction, so they
//     stay ints until the frame moves past it, and every GC point that
//     frame reaches after it writes its pc again (an interpreted one with
//     no mask). Every reader of a pc goes through Frame::pc().
//  Rejected: values and frames on the native stack (would need conservative
//  or stack-map scanning before the JIT exists, and native overflow checks);
//  a linked list of heap-allocated frames (an allocation per call).
#ifndef MINIVM_VM_RUNTIME_THREAD_H_
#define MINIVM_VM_RUNTIME_THREAD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "gc/heap.h"
#include "gc/mutator.h"
#include "gc/object.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/check.h"
#include "vm/runtime/errors.h"
#include "vm/runtime/rng.h"

namespace minivm {

class VM;

struct Frame {
  static constexpr int kMaskShift = 48;
  static constexpr uintptr_t kPcBits = (uintptr_t{1} << kMaskShift) - 1;
  static constexpr int kMaskSlots = 64 - kMaskShift;  // the bits above the pc

  const Function* fn;
  // The start of the current instruction (see 3. above) in the low 48 bits
  // and the int mask (5.) in the top 16. Read through pc() and int_mask().
  uintptr_t pc_word;
  gc::Value* base;  // first slot: parameter 0

  const uint8_t* pc() const { return reinterpret_cast<const uint8_t*>(pc_word & kPcBits); }
  void set_pc(const uint8_t* p) { pc_word = reinterpret_cast<uintptr_t>(p); }
  // Bit i: slot base[i]'s home is not to be read (5.).
  uint32_t int_mask() const { return static_cast<uint32_t>(pc_word >> kMaskShift); }
};
static_assert(sizeof(uintptr_t) == 8, "the int mask needs 64-bit pc words");

// Slots above a frame's max_stack that a built-in may push as temporary roots
// without checking (the frame-entry check reserves them).
inline constexpr size_t kStackSlack = 16;
inline constexpr size_t kMinValueStackSlots = size_t{1} << 20;
inline constexpr size_t kTypicalFrameSlots = 256;
inline constexpr size_t kMaxValueStackSlots = size_t{1} << 30;  // 8 GB reserved

enum class ThreadLifecycle { kCreated, kRunning, kFinished };

struct VMThread {
  // Offset 0 (see 1.). Everything below is the VM's.
  gc::Mutator mutator;

  gc::Value* sp = nullptr;  // precise top of the value stack (see 2.)
  Frame* fp = nullptr;      // the current frame; frames_begin - 1 when none

  gc::Value* stack_begin = nullptr;
  gc::Value* stack_end = nullptr;
  Frame* frames_begin = nullptr;
  Frame* frames_end = nullptr;  // frames_begin + --stack-depth

  VM* vm = nullptr;
  int index = 0;     // spawn order: 0 is main
  std::string name;  // "main", "thread-1", ...
  // The thread that spawned this one; null for main. Threads are never
  // freed while the VM lives, so it stays valid after the parent finished.
  VMThread* parent = nullptr;
  // A VMTI agent thread (RunAgentThread, VM::StartAgentThread): it runs an
  // agent's native function, has no language frames and is never attached
  // to the heap, so it never holds up a safepoint (the heap sees it as an
  // outside thread, like the agent's own pthreads).
  bool agent_thread = false;
  Rng rng;

  // Set by an instruction that fails; read once the loop has returned kError.
  RuntimeError error;
  // Set by exit(n) (Outcome::kExit).
  int exit_code = 0;

  // Lifecycle, guarded by VM::threads_mu_. `start_args` hold the spawn
  // arguments until the new thread has attached and copied them to its stack;
  // `result` holds the return value once finished. Both are roots visited by
  // VM::VisitGlobalRoots.
  ThreadLifecycle lifecycle = ThreadLifecycle::kCreated;
  std::vector<gc::Value> start_args;
  const Function* start_function = nullptr;
  gc::Value result;
  std::thread os_thread;
  // The thread this one is waiting for in join(), or null: the edges of the
  // wait-for graph that VM::Join checks for a cycle before it waits.
  VMThread* joining = nullptr;

  // A thread with its stacks reserved for `stack_depth` frames, or
  // ResourceExhausted (one line naming the thread and the stack) when the
  // address space, or `ulimit -v`, has no room for them: the VM reports that
  // as an error (at start, exit 1; at spawn, a runtime error), never aborts.
  static absl::StatusOr<std::unique_ptr<VMThread>> Create(VM* vm, int index, std::string name,
                                                          size_t stack_depth, Rng rng);
  // Without stacks (Create reserves them); ReleaseStacks is then a no-op.
  VMThread(VM* vm, int index, std::string name, Rng rng);
  ~VMThread();
  VMThread(const VMThread&) = delete;
  VMThread& operator=(const VMThread&) = delete;

  static VMThread* FromMutator(gc::Mutator* m) { return reinterpret_cast<VMThread*>(m); }
  int depth() const { return static_cast<int>(fp - frames_begin + 1); }

  // Records a pending error. The caller has written sp/pc back.
  void Raise(ErrorKind kind, std::string message) {
    error.kind = kind;
    error.message = std::move(message);
  }

  // Allocates through the heap's entry point (sp/pc must be written back).
  // On failure raises `heap exhausted` and returns nullptr; sizes above
  // kMaxObjectSize are refused up front.
  gc::Object* Allocate(const Klass* klass, size_t size, uint64_t length);
  // The same with a size that may exceed what size_t can hold (array(n) with
  // a huge n): refuses anything above kMaxObjectSize.
  gc::Object* AllocateArray(const Klass* klass, uint64_t length);

  // Temporary roots for built-ins: at most kStackSlack, popped before return.
  // EnterFrame keeps kStackSlack slots free above every frame, so a push
  // never reaches stack_end.
  gc::Value* PushRoot(gc::Value v) {
    MINIVM_VM_DCHECK(sp < stack_end, "temporary root pushed past the value stack (sp %p)",
                     static_cast<void*>(sp));
    *sp = v;
    return sp++;
  }
  void PopRoots(size_t n) {
    MINIVM_VM_DCHECK(n <= static_cast<size_t>(sp - stack_begin),
                     "popped %d roots, more than pushed", n);
    sp -= n;
  }

  // Unmaps the stacks of a finished, detached thread (a program may spawn
  // and join many threads; only their results must survive).
  void ReleaseStacks();

  // The trace of this thread's frames, innermost first, bounded: a stack
  // deeper than inner + outer frames keeps its `inner` innermost and `outer`
  // outermost ones (errors.h; the defaults are what an error reports).
  // Safe to call on the thread itself, or on a thread stopped at a
  // safepoint.
  ReportedTrace StackTrace(const Program& program, size_t inner = kTraceInnermostFrames,
                           size_t outer = kTraceOutermostFrames) const;
  // The value stack's slot capacity.
  size_t stack_slots() const { return static_cast<size_t>(stack_end - stack_begin); }

  // Compiled code calls compiled code natively (vm/jit/), so deep recursion
  // could overflow the OS thread's stack. Below this native stack address
  // neither tier enters compiled code: calls run in the interpreter, which
  // never recurses natively. 0 until SetNativeStackLimit, which the OS
  // thread running this VMThread calls before running any code.
  uintptr_t native_stack_limit = 0;
  void SetNativeStackLimit();
  // True when the calling OS thread (this VMThread's) is deep enough that it
  // must not enter compiled code.
  bool NativeStackLow() const {
    return reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) < native_stack_limit;
  }
  // The activation optimised code handed back to the interpreter for want of
  // room (vm/jit/frames.cc .checks.once) while the interpreter runs it,
  // else null. Its loops stay interpreted: on-stack replacement would enter
  // the same code, find no room again and nest one more native activation
  // per iteration. A field, not a local of the interpreter's loop, so that
  // it costs the loop no register.
  const Frame* resumed_frame = nullptr;

  // Bytes of the two mappings (kept public: every member shares one access
  // level so that the class stays standard-layout and offsetof is defined).
  size_t stack_bytes = 0;
  size_t frames_bytes = 0;
};

static_assert(std::is_standard_layout_v<VMThread>);
static_assert(offsetof(VMThread, mutator) == 0, "a VMThread* must also be its gc::Mutator*");

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_THREAD_H_
