#include "vm/bytecode/disassembler.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/bytecode/opcodes.h"
#include "vm/compiler/compiler.h"

namespace minivm {
namespace {

std::unique_ptr<Program> CompileOk(std::string_view source) {
  CompileResult r = Compile("t.mv", source);
  for (const Diagnostic& d : r.errors) ADD_FAILURE() << FormatDiagnostic("t.mv", d);
  return std::move(r.program);
}

TEST(DisassemblerTest, WholeProgram) {
  auto p = CompileOk(
      "class Node { left, right }\n"
      "var count = 0;\n"
      "fn make(d) {\n"
      "  if (d == 0) { return new Node(); }\n"
      "  return new Node(make(d - 1), null);\n"
      "}\n"
      "fn main() {\n"
      "  var n = make(2);\n"
      "  while (n != null) { n = n.left; count = count + 1; }\n"
      "  print(\"count:\\t\\\"\", count);\n"
      "  join(spawn make(1));\n"
      "}\n");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Disassemble(*p),
            R"(program t.mv: 3 functions, 1 classes, 1 globals, 1 strings
class Node #0 { left, right }
global count #0

fn make #0: arity 1, locals 1, max stack 3, field caches 0, line 3
  00000     4  LOAD_LOCAL     0
  00003     4  PUSH_INT       0
  00012     4  EQ
  00013     4  JUMP_IF_FALSE  -> 25
  00018     4  NEW            Node#0, 0 args
  00024     4  RETURN
  00025     5  NEW            Node#0, 0 args
  00031     5  LOAD_LOCAL     0
  00034     5  PUSH_INT       1
  00043     5  SUB
  00044     5  CALL           make#0, 1 arg
  00050     5  PUSH_NULL
  00051     5  INIT_FIELDS    Node#0, 2 args
  00057     5  RETURN

fn main #1: arity 0, locals 1, max stack 2, field caches 1, line 7
  00000     8  PUSH_INT       2
  00009     8  CALL           make#0, 1 arg
  00015     8  STORE_LOCAL    0
  00018     9  LOAD_LOCAL     0
  00021     9  PUSH_NULL
  00022     9  NE
  00023     9  JUMP_IF_FALSE  -> 68
  00028     9  LOAD_LOCAL     0
  00031     9  GET_FIELD      left#0, cache 0
  00040     9  STORE_LOCAL    0
  00043     9  LOAD_GLOBAL    count#0
  00048     9  PUSH_INT       1
  00057     9  ADD
  00058     9  STORE_GLOBAL   count#0
  00063     9  LOOP           -> 18
  00068    10  PUSH_STRING    "count:\t\""#0
  00073    10  LOAD_GLOBAL    count#0
  00078    10  CALL_BUILTIN   print, 2 args
  00081    10  POP
  00082    11  PUSH_INT       1
  00091    11  SPAWN          make#0, 1 arg
  00097    11  CALL_BUILTIN   join, 1 arg
  00100    11  POP
  00101    12  PUSH_NULL
  00102    12  RETURN

fn <globals> #2: arity 0, locals 0, max stack 1, field caches 0, line 1
  00000     2  PUSH_INT       0
  00009     2  STORE_GLOBAL   count#0
  00014     2  PUSH_NULL
  00015     2  RETURN
)");
}

TEST(DisassemblerTest, MalformedCodeIsShownNotTrusted) {
  Program p;
  Function fn;
  fn.name = "junk";
  fn.code = {static_cast<uint8_t>(Opcode::CALL),
             9,
             0,
             0,
             0,
             1,  // no function #9
             static_cast<uint8_t>(Opcode::PUSH_STRING),
             3,
             0,
             0,
             0,
             static_cast<uint8_t>(Opcode::GET_FIELD),
             7,
             0,
             0,
             0,
             0,
             0,
             0,
             0,
             250,  // not an opcode
             static_cast<uint8_t>(Opcode::PUSH_INT),
             1,
             2};  // truncated
  const std::string text = DisassembleFunction(p, fn);
  EXPECT_THAT(text, ::testing::HasSubstr("CALL           <invalid>#9, 1 arg"));
  EXPECT_THAT(text, ::testing::HasSubstr("PUSH_STRING    <invalid>#3"));
  EXPECT_THAT(text, ::testing::HasSubstr("GET_FIELD      <invalid>#7, cache 0"));
  EXPECT_THAT(text, ::testing::HasSubstr("<bad opcode 250>"));
  EXPECT_THAT(text, ::testing::HasSubstr("PUSH_INT <truncated>"));
}

TEST(DisassemblerTest, EveryOpcodeHasAName) {
  for (int i = 0; i < kNumOpcodes; ++i) {
    EXPECT_FALSE(GetOpcodeInfo(static_cast<Opcode>(i)).name.empty());
  }
}

}  // namespace
}  // namespace minivm
