// Threads: spawn, join, names, per-thread errors, and the VMThread layout.
#include "vm/runtime/thread.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/vm/program_builder.h"

namespace minivm::testing {
namespace {

TEST(ThreadTest, MutatorIsAtOffsetZero) {
  static_assert(offsetof(VMThread, mutator) == 0);
  absl::StatusOr<std::unique_ptr<VMThread>> created =
      VMThread::Create(nullptr, 3, "thread-3", 100, Rng(0, 3));
  ASSERT_TRUE(created.ok()) << created.status();
  VMThread& t = **created;
  EXPECT_EQ(VMThread::FromMutator(&t.mutator), &t);
  EXPECT_EQ(t.sp, t.stack_begin);
  EXPECT_GE(t.stack_slots(), kMinValueStackSlots);
  EXPECT_EQ(t.frames_end - t.frames_begin, 100);
  EXPECT_EQ(t.depth(), 0);
}

TEST(ThreadTest, StacksTheAddressSpaceCannotHoldAreAnErrorNotAnAbort) {
  // 2^44 frames of 24 bytes: more than the 128 TB a process can map.
  absl::StatusOr<std::unique_ptr<VMThread>> t =
      VMThread::Create(nullptr, 2, "thread-2", size_t{1} << 44, Rng(0, 2));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(t.status().message()),
              ::testing::HasSubstr("bytes for the frame stack of thread thread-2"));
  // A depth whose byte size does not fit in size_t at all.
  t = VMThread::Create(nullptr, 2, "thread-2", SIZE_MAX / 2, Rng(0, 2));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(ThreadTest, VmWhoseMainStacksCannotBeReservedIsNotCreated) {
  VmOptions options;
  options.heap.max_heap_bytes = size_t{8} << 20;
  options.exit_process = false;
  options.stack_depth = size_t{1} << 44;
  absl::StatusOr<std::unique_ptr<VM>> vm = VM::Create(ReturnNullProgram(), options);
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(vm.status().message()), ::testing::HasSubstr("of thread main"));
}

// worker(x): print(thread_name(), x); return x * 2
uint32_t AddWorker(ProgramBuilder& pb) {
  Asm w;
  w.Builtin(Builtin::k_thread_name, 0).Load(0).Builtin(Builtin::k_print, 2).Op(Opcode::POP);
  w.Load(0).Int(2).Op(Opcode::MUL).Ret();
  return pb.AddFunction("worker", 1, 1, 4, w);
}

TEST(ThreadTest, SpawnAndJoinReturnResultsInSpawnOrder) {
  ProgramBuilder pb;
  const uint32_t worker = AddWorker(pb);
  Asm m;
  m.Int(10).Spawn(worker, 1).Store(0);
  m.Load(0).Builtin(Builtin::k_join, 1).Builtin(Builtin::k_print, 1).Op(Opcode::POP);
  m.Int(20).Spawn(worker, 1).Store(1);
  m.Load(1).Builtin(Builtin::k_join, 1).Load(1).Builtin(Builtin::k_join, 1);
  m.Load(1).Builtin(Builtin::k_print, 3).Op(Opcode::POP).Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 2, 8, m));
  RunResult r = RunProgram(pb.Build());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "thread-1 10\n20\nthread-2 20\n40 40 <Thread>\n");
}

RunResult RunChurn(int threads, int64_t iterations, VmOptions options);

TEST(ThreadTest, ManyThreadsAllocateConcurrently) {
  RunResult r = RunChurn(8, 3000, {});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "3000\n3000\n3000\n3000\n3000\n3000\n3000\n3000\n");
}

// Every allocation slow path collects and verifies the heap: objects move
// under the threads' feet, and every slot they hold must follow.
TEST(ThreadTest, ManyThreadsAllocateUnderGcStress) {
  VmOptions options;
  options.heap.gc_stress_every = 1;
  options.heap.verify_heap = true;
  options.heap.max_heap_bytes = size_t{16} << 20;
  RunResult r = RunChurn(3, 1500, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1500\n1500\n1500\n");
}

RunResult RunChurn(int threads, int64_t iterations, VmOptions options) {
  ProgramBuilder pb;
  const uint32_t node = pb.AddClass("Node", {"next"});
  const uint32_t next = pb.Symbol("next");
  const uint32_t x = pb.AddString("x");
  // churn(n): var l = null; var s = "";
  //   while (n > 0) { l = new Node(l); s = s + "x"; n = n - 1; }
  //   var c = 0; while (l != null) { c = c + 1; l = l.next; }
  //   return join-able result: c + len(s) - n0 ... (c and len(s) both equal n0)
  Asm c;
  c.Str(x).Int(0).Op(Opcode::GET_INDEX).Op(Opcode::POP);  // touch the constant
  c.Str(x).Store(2);
  const size_t top = c.here();
  c.Load(0).Int(0).Op(Opcode::GT);
  const size_t out = c.Jump(Opcode::JUMP_IF_FALSE);
  c.Load(1).New(node, 1).Store(1);
  c.Load(2).Str(x).Op(Opcode::ADD).Store(2);
  c.Load(0).Int(1).Op(Opcode::SUB).Store(0);
  c.Loop(top);
  c.Bind(out);
  c.Int(0).Store(3);
  const size_t top2 = c.here();
  c.Load(1).Null().Op(Opcode::NE);
  const size_t out2 = c.Jump(Opcode::JUMP_IF_FALSE);
  c.Load(3).Int(1).Op(Opcode::ADD).Store(3);
  c.Load(1).GetField(next).Store(1);
  c.Loop(top2);
  c.Bind(out2);
  // assert(len(s) == count + 1)
  c.Load(2).Builtin(Builtin::k_len, 1).Load(3).Int(1).Op(Opcode::ADD).Op(Opcode::EQ);
  c.Builtin(Builtin::k_assert, 1).Op(Opcode::POP);
  c.Load(3).Ret();
  const uint32_t churn = pb.AddFunction("churn", 1, 4, 4, c);
  Asm m;
  for (int i = 0; i < threads; ++i) m.Int(iterations).Spawn(churn, 1);
  // Join in reverse spawn order (the Threads are on the operand stack).
  for (int i = 0; i < threads; ++i) {
    m.Builtin(Builtin::k_join, 1).Builtin(Builtin::k_print, 1).Op(Opcode::POP);
  }
  m.Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, static_cast<uint16_t>(threads + 2), m));
  return RunProgram(pb.Build(), options);
}

TEST(ThreadTest, JoiningItselfIsAValueErrorOnThatThread) {
  ProgramBuilder pb;
  const uint32_t g = pb.AddGlobal("t");
  // selfjoin(): while (t == null) {} ; return join(t)
  Asm s(4);
  const size_t top = s.here();
  s.LoadGlobal(g).Null().Op(Opcode::EQ);
  const size_t done = s.Jump(Opcode::JUMP_IF_FALSE);
  s.Loop(top);
  s.Bind(done);
  s.Line(5).LoadGlobal(g).Builtin(Builtin::k_join, 1).Ret();
  const uint32_t selfjoin = pb.AddFunction("selfjoin", 0, 0, 4, s);
  Asm m;
  m.Spawn(selfjoin, 0).StoreGlobal(g);
  m.LoadGlobal(g).Builtin(Builtin::k_join, 1).Builtin(Builtin::k_print, 1).Op(Opcode::POP);
  m.Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 4, m));
  RunResult r = RunProgram(pb.Build());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: value error: a thread cannot join itself\n  at selfjoin (test.mv:5)\n");
}

TEST(ThreadTest, ErrorInAThreadEndsTheProcessWithExitCode1) {
  ProgramBuilder pb;
  Asm f(12);
  f.Int(1).Int(0).Op(Opcode::DIV).Ret();
  const uint32_t bad = pb.AddFunction("bad", 0, 0, 2, f);
  Asm m;
  m.Spawn(bad, 0).Builtin(Builtin::k_join, 1).Op(Opcode::POP);
  // Would print if the process survived.
  m.Int(1).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 4, m));
  std::unique_ptr<Program> program = pb.Build();
  EXPECT_EXIT(
      {
        VmOptions options;
        options.heap.max_heap_bytes = size_t{16} << 20;
        auto vm = VM::Create(std::move(program), options);
        (*vm)->ExitProcess((*vm)->Run());
      },
      ::testing::ExitedWithCode(1), "error: division by zero: 1 / 0\n  at bad \\(test.mv:12\\)");
}

}  // namespace
}  // namespace minivm::testing
