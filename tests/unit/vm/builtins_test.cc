// Built-in functions, on hand-assembled bytecode.
#include "vm/runtime/builtins.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/unit/vm/program_builder.h"

namespace minivm::testing {
namespace {

// print(f(s)) where s is a string constant and f a one-argument built-in.
RunResult OnString(Builtin b, const std::string& s) {
  ProgramBuilder pb;
  const uint32_t c = pb.AddString(s);
  Asm m;
  m.Str(c).Builtin(b, 1).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  return RunMain(pb, m);
}

RunResult OnInt(Builtin b, int64_t i) {
  ProgramBuilder pb;
  Asm m;
  m.Int(i).Builtin(b, 1).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  return RunMain(pb, m);
}

TEST(BuiltinsTest, PrintFormats) {
  ProgramBuilder pb;
  const uint32_t s = pb.AddString("text");
  pb.AddClass("Node", {"a"});
  Asm m;
  m.Builtin(Builtin::k_print, 0).Op(Opcode::POP);
  m.Int(-5).Str(s).Null().New(0, 0).Int(0).Builtin(Builtin::k_array, 1);
  m.Builtin(Builtin::k_print, 5).Op(Opcode::POP).Null().Ret();
  EXPECT_EQ(RunMainOutput(pb, m), "\n-5 text null <Node> <Array>\n");
}

TEST(BuiltinsTest, IntParsing) {
  EXPECT_EQ(OnString(Builtin::k_int, "-12").out, "-12\n");
  EXPECT_EQ(OnString(Builtin::k_int, "+7").out, "7\n");
  EXPECT_EQ(OnString(Builtin::k_int, "4611686018427387903").out, "4611686018427387903\n");
  EXPECT_EQ(OnString(Builtin::k_int, "-4611686018427387904").out, "-4611686018427387904\n");
  for (const char* input : {"4611686018427387904", "99999999999999999999999"}) {
    EXPECT_EQ(FirstLine(OnString(Builtin::k_int, input).err),
              absl::StrCat("error: value error: int: \"", input, "\" is out of the 63-bit range"));
  }
  for (const char* input : {"12a", "", "-", " 1"}) {
    EXPECT_EQ(FirstLine(OnString(Builtin::k_int, input).err),
              absl::StrCat("error: value error: int: malformed integer \"", input, "\""));
  }
  EXPECT_EQ(OnInt(Builtin::k_int, 5).out, "5\n");
}

TEST(BuiltinsTest, StrAndLen) {
  EXPECT_EQ(OnInt(Builtin::k_str, -42).out, "-42\n");
  EXPECT_EQ(OnString(Builtin::k_str, "s").out, "s\n");
  EXPECT_EQ(OnString(Builtin::k_len, "hello").out, "5\n");
  EXPECT_EQ(FirstLine(OnInt(Builtin::k_len, 1).err),
            "error: type error: len expects an Array, Bytes or String, got int");
}

TEST(BuiltinsTest, ArrayAndBytesArguments) {
  EXPECT_EQ(FirstLine(OnInt(Builtin::k_array, -1).err),
            "error: value error: array length -1 is negative");
  EXPECT_EQ(FirstLine(OnString(Builtin::k_bytes, "x").err),
            "error: type error: bytes expects an int, got String");
  EXPECT_EQ(FirstLine(OnInt(Builtin::k_array, gc::kMaxInt).err),
            "error: heap exhausted: cannot allocate 36893488147419103248 bytes");
  VmOptions small;
  small.heap.max_heap_bytes = size_t{4} << 20;
  ProgramBuilder pb;
  Asm m;
  m.Int(1 << 20).Builtin(Builtin::k_array, 1).Ret();
  EXPECT_EQ(FirstLine(RunMain(pb, m, 2, 16, small).err),
            "error: heap exhausted: cannot allocate 8388632 bytes");
}

TEST(BuiltinsTest, Args) {
  ProgramBuilder pb;
  Asm m;
  m.Builtin(Builtin::k_args, 0).Store(0);
  m.Load(0).Builtin(Builtin::k_len, 1);
  m.Load(0).Int(0).Op(Opcode::GET_INDEX);
  m.Load(0).Int(1).Op(Opcode::GET_INDEX);
  m.Builtin(Builtin::k_print, 3).Op(Opcode::POP).Null().Ret();
  VmOptions options;
  options.program_args = {"first", "2"};
  EXPECT_EQ(RunMainOutput(pb, m, 2, 16, options), "2 first 2\n");
}

TEST(BuiltinsTest, AssertMessages) {
  {
    ProgramBuilder pb;
    const uint32_t s = pb.AddString("it broke");
    Asm m(3);
    m.Int(1).Builtin(Builtin::k_assert, 1).Op(Opcode::POP);
    m.Int(0).Str(s).Builtin(Builtin::k_assert, 2).Ret();
    EXPECT_EQ(RunMainError(pb, m), "error: assertion failed: it broke\n  at main (test.mv:3)\n");
  }
  {
    ProgramBuilder pb;
    Asm m;
    m.Null().Builtin(Builtin::k_assert, 1).Ret();
    EXPECT_EQ(FirstLine(RunMain(pb, m).err), "error: assertion failed");
  }
}

TEST(BuiltinsTest, ExitCodes) {
  ProgramBuilder pb;
  Asm m;
  m.Int(1).Builtin(Builtin::k_print, 1).Op(Opcode::POP);
  m.Int(7).Builtin(Builtin::k_exit, 1).Op(Opcode::POP);
  m.Int(2).Builtin(Builtin::k_print, 1).Op(Opcode::POP).Null().Ret();
  RunResult r = RunMain(pb, m);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.out, "1\n");
  EXPECT_EQ(FirstLine(OnInt(Builtin::k_exit, 256).err),
            "error: value error: exit code 256 not in 0..255");
}

std::string RandSequence(uint64_t seed) {
  ProgramBuilder pb;
  Asm m;
  for (int i = 0; i < 5; ++i) m.Int(1000).Builtin(Builtin::k_rand, 1);
  m.Builtin(Builtin::k_print, 5).Op(Opcode::POP).Null().Ret();
  VmOptions options;
  options.seed = seed;
  return RunMain(pb, m, 2, 16, options).out;
}

TEST(BuiltinsTest, RandIsDeterministicPerSeed) {
  EXPECT_EQ(RandSequence(1), RandSequence(1));
  EXPECT_NE(RandSequence(1), RandSequence(2));
  EXPECT_EQ(FirstLine(OnInt(Builtin::k_rand, 0).err),
            "error: value error: rand bound 0 is not positive");
}

TEST(BuiltinsTest, ThreadNameNanotimeGc) {
  ProgramBuilder pb;
  Asm m;
  m.Builtin(Builtin::k_thread_name, 0).Builtin(Builtin::k_gc, 0);
  m.Builtin(Builtin::k_nanotime, 0).Builtin(Builtin::k_nanotime, 0).Op(Opcode::LE);
  m.Builtin(Builtin::k_print, 3).Op(Opcode::POP).Null().Ret();
  RunResult r = RunMain(pb, m);
  EXPECT_EQ(r.out, "main null 1\n");
}

}  // namespace
}  // namespace minivm::testing
