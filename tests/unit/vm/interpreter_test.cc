// The dispatch loop on hand-assembled bytecode (independent of the compiler).
#include "vm/runtime/interpreter.h"

#include <string>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/unit/vm/program_builder.h"

namespace minivm::testing {
namespace {

// Prints the result of `a op b`.
std::string Binary(int64_t a, Opcode op, int64_t b) {
  ProgramBuilder pb;
  Asm m;
  m.Int(a).Int(b).Op(op).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  return RunMainOutput(pb, m);
}

TEST(InterpreterTest, IntegerArithmetic) {
  EXPECT_EQ(Binary(2, Opcode::ADD, 3), "5\n");
  EXPECT_EQ(Binary(2, Opcode::SUB, 3), "-1\n");
  EXPECT_EQ(Binary(-6, Opcode::MUL, 7), "-42\n");
  EXPECT_EQ(Binary(-7, Opcode::DIV, 2), "-3\n");
  EXPECT_EQ(Binary(-7, Opcode::MOD, 2), "-1\n");
  EXPECT_EQ(Binary(7, Opcode::MOD, -2), "1\n");
  EXPECT_EQ(Binary(7, Opcode::DIV, -2), "-3\n");
}

TEST(InterpreterTest, ArithmeticWrapsAt63Bits) {
  EXPECT_EQ(Binary(gc::kMaxInt, Opcode::ADD, 1), "-4611686018427387904\n");
  EXPECT_EQ(Binary(gc::kMinInt, Opcode::SUB, 1), "4611686018427387903\n");
  EXPECT_EQ(Binary(gc::kMinInt, Opcode::DIV, -1), "-4611686018427387904\n");
  EXPECT_EQ(Binary(gc::kMinInt, Opcode::MOD, -1), "0\n");
  EXPECT_EQ(Binary(gc::kMaxInt, Opcode::MUL, 2), "-2\n");
  ProgramBuilder pb;
  Asm m;
  m.Int(gc::kMinInt).Op(Opcode::NEG).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  EXPECT_EQ(RunMain(pb, m).out, "-4611686018427387904\n");
}

TEST(InterpreterTest, Comparisons) {
  EXPECT_EQ(Binary(1, Opcode::LT, 2), "1\n");
  EXPECT_EQ(Binary(2, Opcode::LT, 2), "0\n");
  EXPECT_EQ(Binary(2, Opcode::LE, 2), "1\n");
  EXPECT_EQ(Binary(-3, Opcode::GT, -4), "1\n");
  EXPECT_EQ(Binary(-5, Opcode::GE, -4), "0\n");
  EXPECT_EQ(Binary(5, Opcode::EQ, 5), "1\n");
  EXPECT_EQ(Binary(5, Opcode::NE, 5), "0\n");
}

TEST(InterpreterTest, DivisionByZeroReportsKindMessageAndTrace) {
  ProgramBuilder pb;
  Asm avg(10);
  avg.Load(0).Line(11).Int(0).Op(Opcode::DIV).Ret();
  const uint32_t f = pb.AddFunction("average", 1, 1, 4, avg);
  Asm m(20);
  m.Int(10).Line(21).Call(f, 1).Op(Opcode::POP).Null().Ret();
  EXPECT_EQ(RunMainError(pb, m),
            "error: division by zero: 10 / 0\n"
            "  at average (test.mv:11)\n"
            "  at main (test.mv:21)\n");
}

// fib(n) = n < 2 ? n : fib(n-1) + fib(n-2)
uint32_t AddFib(ProgramBuilder& pb) {
  const uint32_t fib = pb.AddFunction("fib", 1, 1, 4, Asm());
  Asm a;
  a.Load(0).Int(2).Op(Opcode::LT);
  const size_t j = a.Jump(Opcode::JUMP_IF_FALSE);
  a.Load(0).Ret();
  a.Bind(j);
  a.Load(0).Int(1).Op(Opcode::SUB).Call(fib, 1);
  a.Load(0).Int(2).Op(Opcode::SUB).Call(fib, 1);
  a.Op(Opcode::ADD).Ret();
  pb.SetCode(fib, a);
  return fib;
}

TEST(InterpreterTest, RecursiveCalls) {
  ProgramBuilder pb;
  const uint32_t fib = AddFib(pb);
  Asm m;
  m.Int(20).Call(fib, 1).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  EXPECT_EQ(RunMainOutput(pb, m), "6765\n");
}

// main (at line 9) prints down(n), where down(n) = n == 0 ? 0 : down(n - 1)
// (its recursive call at line 6), with calls limited to `stack_depth`.
RunResult RunDown(int64_t n, size_t stack_depth) {
  ProgramBuilder pb;
  const uint32_t down = pb.AddFunction("down", 1, 1, 4, Asm());
  Asm a(5);
  a.Load(0).Int(0).Op(Opcode::EQ);
  const size_t j = a.Jump(Opcode::JUMP_IF_FALSE);
  a.Int(0).Ret();
  a.Bind(j);
  a.Line(6).Load(0).Int(1).Op(Opcode::SUB).Call(down, 1).Ret();
  pb.SetCode(down, a);
  Asm m(9);
  m.Int(n).Call(down, 1).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  VmOptions options;
  options.stack_depth = stack_depth;
  return RunMain(pb, m, 0, 8, options);
}

TEST(InterpreterTest, StackDepthLimitRaisesStackOverflow) {
  RunResult r = RunDown(1000, 50);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(FirstLine(r.err), "error: stack overflow: more than 50 calls deep");
  // One trace line per frame: main and 49 frames of down.
  size_t lines = 0;
  for (char c : r.err) lines += c == '\n';
  EXPECT_EQ(lines, 51u);
  EXPECT_NE(r.err.find("  at down (test.mv:6)\n  at main (test.mv:9)\n"), std::string::npos);
}

TEST(InterpreterTest, DeepStackOverflowTraceKeepsInnermostAndOutermostFrames) {
  RunResult r = RunDown(1000000, 100000);
  EXPECT_EQ(r.exit_code, 1);
  // The error, 50 innermost frames, the omission, 10 outermost (main last).
  std::vector<std::string> lines = absl::StrSplit(r.err, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1 + kTraceInnermostFrames + 1 + kTraceOutermostFrames) << lines[0];
  EXPECT_EQ(lines[0], "error: stack overflow: more than 100000 calls deep");
  for (size_t i = 1; i <= kTraceInnermostFrames; ++i) EXPECT_EQ(lines[i], "  at down (test.mv:6)");
  EXPECT_EQ(lines[1 + kTraceInnermostFrames], "  ... 99940 frames omitted");
  EXPECT_EQ(lines[lines.size() - 2], "  at down (test.mv:6)");
  EXPECT_EQ(lines.back(), "  at main (test.mv:9)");
}

TEST(InterpreterTest, DeepRecursionDoesNotUseTheNativeStack) {
  RunResult r = RunDown(150000, 200000);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0\n");
}

TEST(InterpreterTest, LoopSumsAndLocalsStartNull) {
  ProgramBuilder pb;
  // var i (slot 0) = null -> print it; then i = 0; s = 0; while (i < 1000) { s = s + i; i = i + 1;
  // }
  Asm m;
  m.Load(0).Builtin(Builtin::k_print, 1).Op(Opcode::POP);
  m.Int(0).Store(0).Int(0).Store(1);
  const size_t top = m.here();
  m.Load(0).Int(1000).Op(Opcode::LT);
  const size_t exit = m.Jump(Opcode::JUMP_IF_FALSE);
  m.Load(1).Load(0).Op(Opcode::ADD).Store(1);
  m.Load(0).Int(1).Op(Opcode::ADD).Store(0);
  m.Loop(top);
  m.Bind(exit);
  m.Load(1).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  EXPECT_EQ(RunMainOutput(pb, m, 2, 4), "null\n499500\n");
}

TEST(InterpreterTest, FieldsAndPolymorphicInlineCache) {
  ProgramBuilder pb;
  const uint32_t a = pb.AddClass("A", {"x", "y"});
  const uint32_t b = pb.AddClass("B", {"y", "x", "z"});
  const uint32_t x = pb.Symbol("x");
  // getx(o) = o.x : one site, two classes.
  Asm g;
  g.Load(0).GetField(x).Ret();
  const uint32_t getx = pb.AddFunction("getx", 1, 1, 2, g);
  Asm m;
  m.Int(1).Int(2).New(a, 2).Store(0);  // A(x=1, y=2)
  m.Int(3).Int(4).New(b, 2).Store(1);  // B(y=3, x=4, z=null)
  for (int i = 0; i < 2; ++i) {
    m.Load(0).Call(getx, 1).Load(1).Call(getx, 1).Builtin(Builtin::k_print, 2).Op(Opcode::POP);
  }
  m.Load(1).Int(9).SetField(x);
  m.Load(1).Call(getx, 1).Load(1).GetField(pb.Symbol("z")).Load(1);
  m.Builtin(Builtin::k_print, 3).Op(Opcode::POP).Null().Ret();
  EXPECT_EQ(RunMainOutput(pb, m, 2, 6), "1 4\n1 4\n9 null <B>\n");
}

TEST(InterpreterTest, FieldErrors) {
  {
    ProgramBuilder pb;
    pb.AddClass("A", {"x"});
    Asm m(3);
    m.New(0, 0).GetField(pb.Symbol("nope")).Ret();
    EXPECT_EQ(RunMainError(pb, m),
              "error: unknown field: A has no field 'nope'\n  at main (test.mv:3)\n");
  }
  {
    ProgramBuilder pb;
    Asm m;
    m.Null().Int(1).SetField(pb.Symbol("x")).Null().Ret();
    EXPECT_EQ(FirstLine(RunMainError(pb, m)),
              "error: null dereference: cannot write field 'x' of null");
  }
  {
    ProgramBuilder pb;
    Asm m;
    m.Int(5).GetField(pb.Symbol("x")).Ret();
    EXPECT_EQ(FirstLine(RunMainError(pb, m)), "error: unknown field: int has no field 'x'");
  }
}

TEST(InterpreterTest, StringsConcatenateAndCompareByContents) {
  ProgramBuilder pb;
  const uint32_t ab = pb.AddString("ab");
  const uint32_t cd = pb.AddString("cd");
  const uint32_t abcd = pb.AddString("abcd");
  Asm m;
  m.Str(ab).Str(cd).Op(Opcode::ADD).Store(0);
  m.Load(0).Load(0).Str(abcd).Op(Opcode::EQ).Load(0).Str(ab).Op(Opcode::NE);
  m.Str(ab).Str(ab).Op(Opcode::EQ).Null().Null().Op(Opcode::EQ).Int(0).Null().Op(Opcode::EQ);
  m.Builtin(Builtin::k_print, 6).Op(Opcode::POP).Null().Ret();
  EXPECT_EQ(RunMainOutput(pb, m, 1, 8), "abcd 1 1 1 1 0\n");
}

TEST(InterpreterTest, TypeErrors) {
  ProgramBuilder pb;
  const uint32_t s = pb.AddString("x");
  Asm m(4);
  m.Int(1).Str(s).Op(Opcode::ADD).Ret();
  EXPECT_EQ(RunMainError(pb, m),
            "error: type error: + expects two ints or two Strings, got int and String\n"
            "  at main (test.mv:4)\n");
}

TEST(InterpreterTest, ArraysBytesAndStringIndexing) {
  ProgramBuilder pb;
  const uint32_t hi = pb.AddString("hi");
  Asm m;
  m.Int(3).Builtin(Builtin::k_array, 1).Store(0);
  m.Load(0).Int(1).Int(42).Op(Opcode::SET_INDEX);
  m.Int(4).Builtin(Builtin::k_bytes, 1).Store(1);
  m.Load(1).Int(3).Int(255).Op(Opcode::SET_INDEX);
  m.Load(0).Int(1).Op(Opcode::GET_INDEX);
  m.Load(0).Int(0).Op(Opcode::GET_INDEX);
  m.Load(1).Int(3).Op(Opcode::GET_INDEX);
  m.Str(hi).Int(1).Op(Opcode::GET_INDEX);
  m.Load(0).Builtin(Builtin::k_len, 1).Load(1).Builtin(Builtin::k_len, 1);
  m.Str(hi).Builtin(Builtin::k_len, 1).Load(0).Load(1);
  m.Builtin(Builtin::k_print, 9).Op(Opcode::POP).Null().Ret();
  EXPECT_EQ(RunMainOutput(pb, m, 2, 12), "42 null 255 105 3 4 2 <Array> <Bytes>\n");
}

std::string FirstErrorLine(ProgramBuilder& pb, const Asm& m, uint16_t locals = 1) {
  return FirstLine(RunMainError(pb, m, locals, 8));
}

TEST(InterpreterTest, IndexErrors) {
  {
    ProgramBuilder pb;
    Asm m;
    m.Int(3).Builtin(Builtin::k_array, 1).Int(3).Op(Opcode::GET_INDEX).Ret();
    EXPECT_EQ(FirstErrorLine(pb, m),
              "error: index out of range: index 3 out of range for Array of length 3");
  }
  {
    ProgramBuilder pb;
    Asm m;
    m.Int(3).Builtin(Builtin::k_bytes, 1).Int(-1).Op(Opcode::GET_INDEX).Ret();
    EXPECT_EQ(FirstErrorLine(pb, m),
              "error: index out of range: index -1 out of range for Bytes of length 3");
  }
  {
    ProgramBuilder pb;
    Asm m;
    m.Int(3).Builtin(Builtin::k_bytes, 1).Int(0).Int(256).Op(Opcode::SET_INDEX).Null().Ret();
    EXPECT_EQ(FirstErrorLine(pb, m), "error: value error: byte value 256 not in 0..255");
  }
  {
    ProgramBuilder pb;
    const uint32_t s = pb.AddString("abc");
    Asm m;
    m.Str(s).Int(0).Int(1).Op(Opcode::SET_INDEX).Null().Ret();
    EXPECT_EQ(FirstErrorLine(pb, m),
              "error: type error: cannot assign an element of a String (Strings are "
              "immutable)");
  }
  {
    ProgramBuilder pb;
    Asm m;
    m.Null().Int(0).Op(Opcode::GET_INDEX).Ret();
    EXPECT_EQ(FirstErrorLine(pb, m), "error: null dereference: cannot index null");
  }
  {
    ProgramBuilder pb;
    Asm m;
    m.Int(7).Int(0).Op(Opcode::GET_INDEX).Ret();
    EXPECT_EQ(FirstErrorLine(pb, m), "error: type error: cannot index int");
  }
}

TEST(InterpreterTest, GlobalsAndInitialisersTraceAsGlobals) {
  ProgramBuilder pb;
  const uint32_t g = pb.AddGlobal("g");
  Asm init(2);
  init.Int(41).Int(1).Op(Opcode::ADD).StoreGlobal(g).Null().Ret();
  pb.SetInit(pb.AddFunction("<globals>", 0, 0, 2, init));
  Asm m;
  m.LoadGlobal(g).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  RunResult r = RunMain(pb, m);
  EXPECT_EQ(r.out, "42\n");

  ProgramBuilder bad;
  Asm init2(7);
  init2.Int(1).Int(0).Op(Opcode::MOD).Ret();
  bad.SetInit(bad.AddFunction("<globals>", 0, 0, 2, init2));
  Asm m2;
  m2.Null().Ret();
  RunResult r2 = RunMain(bad, m2);
  EXPECT_EQ(r2.exit_code, 1);
  EXPECT_EQ(r2.err, "error: division by zero: 1 % 0\n  at <globals> (test.mv:7)\n");
}

}  // namespace
}  // namespace minivm::testing
