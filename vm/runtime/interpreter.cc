// The dispatch loop.
//
// Design:
// .dispatch  Computed goto (GCC labels as values): one indirect jump per
//     instruction, each from its own site. pc always points at the start of
//     the current instruction; an instruction advances it by its length.
// .locals  sp, pc, the frame, its base and its field caches live in locals
//     (registers). SYNC() writes sp to the thread and pc to the frame before
//     anything that may allocate, collect, block or stop at a safepoint, and
//     before raising an error (so traces and the GC see the precise
//     state). After such a point every reference is re-read from its stack
//     slot: a moving collection rewrites slots, never C++ locals.
// .int-fast  Integer fast paths work on the tagged bits (int tag bit 0 = 1):
//     a + b is bits(a) + bits(b) - 1, which wraps at 63 bits exactly as the
//     language requires. Everything else (strings, errors, field-cache
//     misses) is in out-of-line cold helpers, keeping the loop small.
// .calls  CALL and RETURN push and pop Frames in the thread's frame array; the
//     loop never recurses, so no program can overflow the native stack.
//     The loop returns when the frame it was entered with returns.
// .polls  Safepoint polls at LOOP (back-edges) and CALL: a relaxed-cost load of
//     the mutator's poll word, with SYNC() only on the rare taken path.
// .memory-model  Globals, fields and elements are read and written with
//     acquire loads and release stores (vm/runtime/shared_slots.h): racy
//     programs (docs/language.md, "Threads") never see a torn value or an
//     object whose header is not yet visible, and stay well-defined C++ (so
//     TSan reports only the VM's own races). Plain moves on x86-64.
//     Rejected: plain accesses plus a release fence after allocation (the
//     JVM's StoreStore barrier): it relies on address dependencies on the
//     reading side, which C++ does not guarantee and TSan cannot see.
// .tiering  Tiering (docs/jit.md): with a JIT installed, CALL and LOOP count the
//     function's hotness while it has no compiled code and report it once
//     hot; once it has, CALL runs the callee's compiled code on the frame
//     EnterFrame pushed, and LOOP hands the running activation to it at the
//     loop header (on-stack replacement). Neither enters compiled code when
//     the native stack is low (VMThread::NativeStackLow): the interpreter
//     goes on instead, since it never recurses natively. With --jit=off the
//     only cost is one predictable branch per CALL and LOOP. Optimised code
//     that finds no room for a call (vm/jit/frames.cc .checks.once)
//     hands its activation back mid-way: InterpretFrame resumes it in its
//     innermost frame, at that CALL, and runs it to its end without
//     on-stack replacement (VMThread::resumed_frame), which would enter the
//     same code, find no room again and nest one more native activation per
//     loop iteration.
#include "vm/runtime/interpreter.h"

#include "vm/runtime/shared_slots.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/base/optimization.h"
#include "absl/strings/str_cat.h"
#include "gc/allocation.h"
#include "gc/heap.h"
#include "gc/write_barrier.h"
#include "vm/bytecode/builtins.h"
#include "vm/bytecode/opcodes.h"
#include "vm/runtime/builtin_classes.h"
#include "vm/runtime/builtins.h"
#include "vm/runtime/slow_paths.h"
#include "vm/runtime/strings.h"
#include "vm/runtime/vm.h"

namespace minivm {
namespace {

using gc::Object;
using gc::Value;

// An instruction's length as a compile-time constant (from the opcode table).
template <Opcode op>
inline constexpr int kLen = OpcodeLength(op);
// DIV/MOD and EQ/NE share a handler that advances pc by one length.
static_assert(kLen<Opcode::DIV> == kLen<Opcode::MOD> && kLen<Opcode::EQ> == kLen<Opcode::NE>);

[[gnu::noinline, gnu::cold, noreturn]] void BadOpcode(const uint8_t* pc) {
  std::fprintf(stderr, "minivm: fatal: invalid opcode %d\n", *pc);
  std::abort();
}

// Counts a call or back-edge of `fn`, which has no compiled code; true when
// it is hot and not yet queued (see Function::hotness).
inline bool CountHot(uint32_t threshold, const Function* fn) {
  const uint32_t h = fn->hotness.load(std::memory_order_relaxed) + 1;
  fn->hotness.store(h, std::memory_order_relaxed);
  return ABSL_PREDICT_FALSE(h >= threshold) &&
         fn->jit_state.load(std::memory_order_relaxed) == JitState::kInterpreted;
}

// NEW's and INIT_FIELDS' initialising stores: fields 0..argc-1 of `obj`, an
// object no other thread can reach yet (so plain stores), with the barrier
// (the object may be old: allocated outside a TLAB, or promoted by a
// collection while INIT_FIELDS' arguments were evaluated).
inline void InitFields(gc::Mutator* m, Object* obj, const Value* args, int argc) {
  Value* fields = obj->fields();
  for (int i = 0; i < argc; ++i) {
    fields[i] = args[i];
    gc::WriteBarrier(m, obj, args[i]);
  }
}

// A shift's count: the right operand's low 6 bits, as Java takes a long
// shift's count (so -1 shifts by 63, 64 by 0). Any int is a valid count.
inline int ShiftCount(Value b) { return static_cast<int>(b.AsInt() & 63); }

// Calls `code` as the JitEntry of a function of N register arguments
// (program.h), taking them from `args`.
template <size_t... I>
uint64_t CallCompiled(JitEntry code, VMThread* t, Frame* frame, uint32_t entry, const Value* args,
                      std::index_sequence<I...>) {
  using Code = uint64_t (*)(void*, void*, uint32_t, decltype(I, uint64_t{})...);
  // Through void(*)(), the generic function pointer type: JitEntry is the
  // type `code` is stored as, Code the type it has (program.h).
  return reinterpret_cast<Code>(reinterpret_cast<void (*)()>(code))(t, frame, entry,
                                                                     args[I].bits()...);
}

// Runs `fn`'s compiled code on its pushed frame. As the interpreter's
// RETURN, the result is left in the frame's base slot. Not inlined: the
// arity switch would grow InterpretFrame's dispatch loop, and code layout
// there moves the interpreter's speed by more than the call costs.
ABSL_ATTRIBUTE_NOINLINE Outcome RunCompiled(VMThread* t, const Function* fn, JitEntry code, Frame* frame,
                           uint32_t entry) {
  static_assert(kMaxRegisterArity == 6, "one case per register arity");
  const Value* args = frame->base;
  uint64_t r;
  switch (RegisterArgs(fn->arity)) {
    case 0: r = CallCompiled(code, t, frame, entry, args, std::make_index_sequence<0>()); break;
    case 1: r = CallCompiled(code, t, frame, entry, args, std::make_index_sequence<1>()); break;
    case 2: r = CallCompiled(code, t, frame, entry, args, std::make_index_sequence<2>()); break;
    case 3: r = CallCompiled(code, t, frame, entry, args, std::make_index_sequence<3>()); break;
    case 4: r = CallCompiled(code, t, frame, entry, args, std::make_index_sequence<4>()); break;
    case 5: r = CallCompiled(code, t, frame, entry, args, std::make_index_sequence<5>()); break;
    default: r = CallCompiled(code, t, frame, entry, args, std::make_index_sequence<6>()); break;
  }
  if (ABSL_PREDICT_FALSE(r == 2 * static_cast<uint64_t>(Outcome::kError) ||
                         r == 2 * static_cast<uint64_t>(Outcome::kExit))) {
    return static_cast<Outcome>(r / 2);
  }
  frame->base[0] = Value::FromBits(r);
  return Outcome::kReturn;
}

}  // namespace

Outcome Interpret(VMThread* t, const Function* fn) {
  Frame* frame = t->fp + 1;
  if (!EnterFrame(t, frame, fn, t->sp)) {
    RaiseStackOverflow(t, frame >= t->frames_end);
    return Outcome::kError;
  }
  t->fp = frame;
  if (JitEntry code = fn->jit_code.load(std::memory_order_acquire);
      code != nullptr && !t->NativeStackLow()) {
    const Outcome o = RunCompiled(t, fn, code, frame, 0);
    if (o == Outcome::kReturn) {
      t->sp = frame->base + 1;
      t->fp = frame - 1;
    }
    return o;
  }
  return InterpretFrame(t, frame);
}

Outcome InterpretFrame(VMThread* t, Frame* const entry, bool resume) {
  VM* const vm = t->vm;
  Value* const globals = vm->globals();
  const Value* const strings = vm->string_constants();
  const Function* const* const functions = vm->functions();
  const Klass* const* const classes = vm->classes();
  gc::Mutator* const m = &t->mutator;
  JitHooks* const jit = vm->jit();  // null: no tiering (--jit=off)
  const uint32_t jit_threshold = vm->jit_threshold();

  // A resumed activation (.tiering) starts in its innermost frame with the
  // operands compiled code wrote back; a new one at its first instruction.
  Frame* frame = resume ? t->fp : entry;
  Value* base = frame->base;
  Value* sp = resume ? t->sp : base + frame->fn->num_locals;
  const uint8_t* pc = frame->pc();
  FieldCache* caches = frame->fn->field_caches.get();

  // The compiler only emits valid opcodes; debug builds check.
  static const void* const kDispatch[kNumOpcodes] = {
#define MINIVM_LABEL(name, operands, pops, pushes, doc) &&op_##name,
      MINIVM_OPCODES(MINIVM_LABEL)
#undef MINIVM_LABEL
  };

#ifdef NDEBUG
#define DISPATCH() goto* kDispatch[*pc]
#else
#define DISPATCH()                       \
  do {                                   \
    if (*pc >= kNumOpcodes) goto op_bad; \
    goto* kDispatch[*pc];                \
  } while (0)
#endif
#define NEXT(op)           \
  do {                     \
    pc += kLen<Opcode::op>; \
    DISPATCH();            \
  } while (0)
#define SYNC()         \
  do {                 \
    frame->set_pc(pc); \
    t->sp = sp;        \
  } while (0)

  DISPATCH();

op_PUSH_INT:
  *sp++ = Value::FromBits(ReadV64(pc + 1));
  NEXT(PUSH_INT);
op_PUSH_NULL:
  *sp++ = Value::Null();
  NEXT(PUSH_NULL);
op_PUSH_STRING:
  *sp++ = strings[ReadU32(pc + 1)];
  NEXT(PUSH_STRING);
op_POP:
  --sp;
  NEXT(POP);
op_LOAD_LOCAL:
  *sp++ = base[ReadU16(pc + 1)];
  NEXT(LOAD_LOCAL);
op_STORE_LOCAL:
  base[ReadU16(pc + 1)] = *--sp;
  NEXT(STORE_LOCAL);
op_LOAD_GLOBAL:
  *sp++ = LoadShared(&globals[ReadU32(pc + 1)]);
  NEXT(LOAD_GLOBAL);
op_STORE_GLOBAL:
  StoreShared(&globals[ReadU32(pc + 1)], *--sp);
  NEXT(STORE_GLOBAL);

// Declares `slot`, the field slot of `obj` for the GET_FIELD/SET_FIELD at
// pc: the inline cache's, else ResolveField's (which raises on failure).
#define FIELD_SLOT(slot, obj, write)                                                  \
  int slot = -1;                                                                      \
  if (ABSL_PREDICT_TRUE(obj.IsRef())) {                                               \
    slot = caches[ReadU32(pc + 5)].Lookup(KlassOf(obj.AsRef()));                      \
  }                                                                                   \
  if (ABSL_PREDICT_FALSE(slot < 0)) {                                                 \
    SYNC();                                                                           \
    slot = ResolveField(t, obj, ReadU32(pc + 1), &caches[ReadU32(pc + 5)], write);    \
    if (slot < 0) return Outcome::kError;                                             \
  }

op_GET_FIELD : {
  const Value obj = sp[-1];
  FIELD_SLOT(slot, obj, /*write=*/false);
  sp[-1] = LoadShared(&obj.AsRef()->fields()[slot]);
  NEXT(GET_FIELD);
}
op_SET_FIELD : {
  const Value obj = sp[-2];
  const Value v = sp[-1];
  FIELD_SLOT(slot, obj, /*write=*/true);
  StoreShared(&obj.AsRef()->fields()[slot], v);
  gc::WriteBarrier(m, obj.AsRef(), v);
  sp -= 2;
  NEXT(SET_FIELD);
}
op_GET_INDEX : {
  const Value obj = sp[-2];
  const Value i = sp[-1];
  if (ABSL_PREDICT_TRUE(IsArray(obj) && i.IsInt() &&
                        static_cast<uint64_t>(i.AsInt()) < obj.AsRef()->length())) {
    sp[-2] = LoadShared(&obj.AsRef()->elements()[i.AsInt()]);
  } else {
    SYNC();
    if (!GetIndexSlow(t, sp - 2)) return Outcome::kError;
  }
  --sp;
  NEXT(GET_INDEX);
}
op_SET_INDEX : {
  const Value obj = sp[-3];
  const Value i = sp[-2];
  const Value v = sp[-1];
  if (ABSL_PREDICT_TRUE(IsArray(obj) && i.IsInt() &&
                        static_cast<uint64_t>(i.AsInt()) < obj.AsRef()->length())) {
    StoreShared(&obj.AsRef()->elements()[i.AsInt()], v);
    gc::WriteBarrier(m, obj.AsRef(), v);
  } else {
    SYNC();
    if (!SetIndexSlow(t, sp - 3)) return Outcome::kError;
  }
  sp -= 3;
  NEXT(SET_INDEX);
}

#define INT_BINARY(op, expr)                                          \
  op_##op : {                                                         \
    const Value a = sp[-2];                                           \
    const Value b = sp[-1];                                           \
    if (ABSL_PREDICT_TRUE(a.IsInt() && b.IsInt())) {                  \
      sp[-2] = (expr);                                                \
    } else {                                                          \
      SYNC();                                                         \
      if (!BinarySlow(t, Opcode::op, sp - 2)) return Outcome::kError; \
    }                                                                 \
    --sp;                                                             \
    NEXT(op);                                                         \
  }
  INT_BINARY(ADD, Value::FromBits(a.bits() + b.bits() - 1))
  INT_BINARY(SUB, Value::FromBits(a.bits() - b.bits() + 1))
  INT_BINARY(MUL, Value::Int(static_cast<int64_t>(static_cast<uint64_t>(a.AsInt()) *
                                                  static_cast<uint64_t>(b.AsInt()))))
  // Bitwise operators on the tagged bits: the tag (bit 0 = 1) survives & and
  // |, and ^ clears it, so it is set again. Shifts untag; ShiftCount masks.
  INT_BINARY(BIT_AND, Value::FromBits(a.bits() & b.bits()))
  INT_BINARY(BIT_OR, Value::FromBits(a.bits() | b.bits()))
  INT_BINARY(BIT_XOR, Value::FromBits((a.bits() ^ b.bits()) | 1))
  INT_BINARY(SHL, Value::Int(static_cast<int64_t>(static_cast<uint64_t>(a.AsInt())
                                                  << ShiftCount(b))))
  INT_BINARY(SHR, Value::Int(a.AsInt() >> ShiftCount(b)))
  INT_BINARY(LT, Value::Int(static_cast<int64_t>(a.bits()) < static_cast<int64_t>(b.bits())))
  INT_BINARY(LE, Value::Int(static_cast<int64_t>(a.bits()) <= static_cast<int64_t>(b.bits())))
  INT_BINARY(GT, Value::Int(static_cast<int64_t>(a.bits()) > static_cast<int64_t>(b.bits())))
  INT_BINARY(GE, Value::Int(static_cast<int64_t>(a.bits()) >= static_cast<int64_t>(b.bits())))
#undef INT_BINARY

op_DIV:
op_MOD : {
  const Value a = sp[-2];
  const Value b = sp[-1];
  // The fast path excludes 0 (error) and -1 (kMinInt / -1 wraps; the slow
  // path's int64 arithmetic handles it without overflow).
  if (ABSL_PREDICT_TRUE(a.IsInt() && b.IsInt() && b.AsInt() > 0)) {
    sp[-2] = Value::Int(*pc == static_cast<uint8_t>(Opcode::DIV) ? a.AsInt() / b.AsInt()
                                                                 : a.AsInt() % b.AsInt());
  } else {
    SYNC();
    if (!BinarySlow(t, static_cast<Opcode>(*pc), sp - 2)) return Outcome::kError;
  }
  --sp;
  pc += kLen<Opcode::DIV>;  // == kLen<Opcode::MOD>
  DISPATCH();
}
op_EQ:
op_NE : {
  const Value a = sp[-2];
  const Value b = sp[-1];
  bool equal = a == b;
  if (!equal && a.IsRef() && b.IsRef()) equal = ValuesEqualSlow(a, b);
  sp[-2] = Value::Int(equal == (*pc == static_cast<uint8_t>(Opcode::EQ)));
  --sp;
  pc += kLen<Opcode::EQ>;  // == kLen<Opcode::NE>
  DISPATCH();
}
op_NEG : {
  const Value a = sp[-1];
  if (ABSL_PREDICT_FALSE(!a.IsInt())) {
    SYNC();
    RaiseUnaryType(t, Opcode::NEG, a);
    return Outcome::kError;
  }
  sp[-1] = Value::FromBits(uint64_t{2} - a.bits());
  NEXT(NEG);
}
op_BIT_NOT : {
  const Value a = sp[-1];
  if (ABSL_PREDICT_FALSE(!a.IsInt())) {
    SYNC();
    RaiseUnaryType(t, Opcode::BIT_NOT, a);
    return Outcome::kError;
  }
  sp[-1] = Value::FromBits(a.bits() ^ ~uint64_t{1});  // ~x, tag bit kept
  NEXT(BIT_NOT);
}
op_NOT:
  sp[-1] = Value::Int(!sp[-1].IsTruthy());
  NEXT(NOT);

op_JUMP:
  pc += kLen<Opcode::JUMP> + ReadI32(pc + 1);
  DISPATCH();
op_JUMP_IF_FALSE:
  if ((*--sp).IsTruthy()) {
    pc += kLen<Opcode::JUMP_IF_FALSE>;
  } else {
    pc += kLen<Opcode::JUMP_IF_FALSE> + ReadI32(pc + 1);
  }
  DISPATCH();
op_LOOP:
  pc += kLen<Opcode::LOOP> + ReadI32(pc + 1);
  if (ABSL_PREDICT_FALSE(m->poll.load(std::memory_order_acquire) != 0)) {
    SYNC();
    vm->heap()->SafepointPoll(m);
  }
  if (jit != nullptr) {
    const Function* fn = frame->fn;
    JitEntry code = fn->jit_code.load(std::memory_order_acquire);
    if (code == nullptr && CountHot(jit_threshold, fn)) {
      SYNC();
      jit->OnHot(t, fn);
      code = fn->jit_code.load(std::memory_order_acquire);
    }
    if (code != nullptr && !t->NativeStackLow() && frame != t->resumed_frame) {
      // On-stack replacement: the compiled code continues this activation
      // at the loop header, reading locals and operands from the frame's
      // slots, and runs it to its end.
      SYNC();
      const uint32_t offset = static_cast<uint32_t>(pc - fn->code.data());
      jit->OnOsr(fn, offset);
      const Outcome o = RunCompiled(t, fn, code, frame, offset + 1);
      if (o != Outcome::kReturn) return o;
      sp = base + 1;  // the result is in base[0], as RETURN leaves it
      goto frame_returned;
    }
  }
  DISPATCH();

op_CALL : {
  const Function* callee = functions[ReadU32(pc + 1)];
  SYNC();  // the caller's pc is its return point; also for the poll below
  if (ABSL_PREDICT_FALSE(m->poll.load(std::memory_order_acquire) != 0)) {
    vm->heap()->SafepointPoll(m);
  }
  Frame* next = frame + 1;
  if (ABSL_PREDICT_FALSE(!EnterFrame(t, next, callee, sp))) {
    RaiseStackOverflow(t, next >= t->frames_end);
    return Outcome::kError;
  }
  if (jit != nullptr) {
    JitEntry code = callee->jit_code.load(std::memory_order_acquire);
    if (code == nullptr && CountHot(jit_threshold, callee)) {
      jit->OnHot(t, callee);  // the caller's state is written back (SYNC above)
      code = callee->jit_code.load(std::memory_order_acquire);
    }
    if (code != nullptr && !t->NativeStackLow()) {
      t->fp = next;
      const Outcome o = RunCompiled(t, callee, code, next, 0);
      if (o != Outcome::kReturn) return o;
      t->fp = frame;
      sp = next->base + 1;
      NEXT(CALL);
    }
  }
  frame = next;
  t->fp = frame;
  base = frame->base;
  sp = base + callee->num_locals;
  pc = frame->pc();
  caches = callee->field_caches.get();
  DISPATCH();
}
op_RETURN : {
  const Value result = sp[-1];
  sp = base;
  *sp++ = result;
}
frame_returned:  // sp == frame->base + 1, the result below it
{
  if (ABSL_PREDICT_FALSE(frame == entry)) {
    t->sp = sp;
    t->fp = frame - 1;
    return Outcome::kReturn;
  }
  --frame;
  t->fp = frame;
  base = frame->base;
  pc = frame->pc() + kLen<Opcode::CALL>;
  caches = frame->fn->field_caches.get();
  DISPATCH();
}
op_CALL_BUILTIN : {
  const int argc = pc[2];
  SYNC();
  Value* args = sp - argc;
  const Outcome o = CallBuiltin(t, static_cast<Builtin>(pc[1]), args, argc);
  if (ABSL_PREDICT_FALSE(o != Outcome::kReturn)) return o;
  sp = args + 1;
  NEXT(CALL_BUILTIN);
}
op_NEW : {
  const Klass* k = classes[ReadU32(pc + 1)];
  const int argc = pc[5];
  SYNC();
  const size_t size = gc::FieldsObjectSize(k->field_count);
  Object* obj = gc::Allocate(m, k, size, 0);
  if (ABSL_PREDICT_FALSE(obj == nullptr)) {
    RaiseHeapExhausted(t, size);
    return Outcome::kError;
  }
  // The arguments are re-read from their slots: the allocation may have
  // moved what they reference.
  Value* args = sp - argc;
  InitFields(m, obj, args, argc);
  sp = args;
  *sp++ = Value::Ref(obj);
  NEXT(NEW);
}
op_INIT_FIELDS : {
  // The object may have been promoted by a collection while the arguments
  // were evaluated: the barrier is needed.
  const int argc = pc[5];
  Value* args = sp - argc;
  InitFields(m, args[-1].AsRef(), args, argc);
  sp = args;
  NEXT(INIT_FIELDS);
}
op_SPAWN : {
  const Function* callee = functions[ReadU32(pc + 1)];
  const int argc = pc[5];
  SYNC();
  Value* args = sp - argc;
  Value result;
  if (!vm->Spawn(t, callee, args, argc, &result)) return Outcome::kError;
  sp = args;
  *sp++ = result;
  NEXT(SPAWN);
}
op_bad:
  __attribute__((unused));
  BadOpcode(pc);

#undef FIELD_SLOT
#undef SYNC
#undef NEXT
#undef DISPATCH
}

}  // namespace minivm
