#include "vm/compiler/compiler.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gc/object.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/bytecode/builtins.h"
#include "vm/bytecode/opcodes.h"
#include "vm/bytecode/verifier.h"

namespace minivm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Errors(std::string_view source) {
  CompileResult r = Compile("t.mv", source);
  std::vector<std::string> out;
  for (const Diagnostic& d : r.errors) {
    out.push_back(absl::StrCat(d.line, ":", d.column, ": ", d.message));
  }
  EXPECT_EQ(r.program == nullptr, !out.empty());
  return out;
}

// Compiles `source`, which must have no errors; every function of the
// result must pass the bytecode verifier (the JIT relies on it).
std::unique_ptr<Program> CompileOk(std::string_view source) {
  CompileResult r = Compile("t.mv", source);
  for (const Diagnostic& d : r.errors) ADD_FAILURE() << FormatDiagnostic("t.mv", d);
  if (r.program != nullptr) {
    for (const auto& fn : r.program->functions) {
      absl::StatusOr<VerifiedCode> verified = VerifyFunction(*r.program, *fn);
      EXPECT_TRUE(verified.ok()) << fn->name << ": " << verified.status();
    }
  }
  return std::move(r.program);
}

const Function& Fn(const Program& p, std::string_view name) {
  for (const auto& f : p.functions) {
    if (f->name == name) return *f;
  }
  ADD_FAILURE() << "no function " << name;
  return *p.functions[0];
}

// One string per instruction: the mnemonic and raw operands, jump targets
// made absolute ("JUMP @12").
std::vector<std::string> Ops(const Function& fn) {
  std::vector<std::string> out;
  size_t pc = 0;
  while (pc < fn.code.size()) {
    const Opcode op = static_cast<Opcode>(fn.code[pc]);
    const OpcodeInfo& info = GetOpcodeInfo(op);
    std::string s(info.name);
    const uint8_t* a = fn.code.data() + pc + 1;
    for (int k = 0; k < info.num_operands; ++k) {
      switch (info.operands[k]) {
        case OperandKind::kV64:  // PUSH_INT's value
          absl::StrAppend(&s, " ", gc::Value::FromBits(ReadV64(a)).AsInt());
          break;
        case OperandKind::kI32:  // a jump's target
          absl::StrAppend(&s, " @", static_cast<int64_t>(pc + info.length) + ReadI32(a));
          break;
        case OperandKind::kU32:
          absl::StrAppend(&s, " ", ReadU32(a));
          break;
        case OperandKind::kU16:
          absl::StrAppend(&s, " ", ReadU16(a));
          break;
        case OperandKind::kU8:
          absl::StrAppend(&s, " ", ReadU8(a));
          break;
      }
      a += OperandSize(info.operands[k]);
    }
    out.push_back(s);
    pc += info.length;
  }
  return out;
}

// Instruction offsets, to write expected jump targets.
std::vector<size_t> Offsets(const Function& fn) {
  std::vector<size_t> out;
  for (size_t pc = 0; pc < fn.code.size();) {
    out.push_back(pc);
    pc += GetOpcodeInfo(static_cast<Opcode>(fn.code[pc])).length;
  }
  return out;
}

// Function `name` of `source` (which must compile) as Ops() and Offsets()
// list it; both empty if it does not compile.
struct Listing {
  std::vector<std::string> ops;
  std::vector<size_t> at;
};
Listing List(std::string_view source, std::string_view name = "main") {
  std::unique_ptr<Program> p = CompileOk(source);
  if (p == nullptr) return {};
  const Function& fn = Fn(*p, name);
  return {Ops(fn), Offsets(fn)};
}

// ---------------------------------------------------------------------------
// Program structure

TEST(CompilerTest, ProgramStructure) {
  auto p = CompileOk(
      "class Node { left, right }\n"
      "var a = 1;\n"
      "fn helper(x, y) { return x; }\n"
      "var b;\n"
      "fn main() { print(\"s\", \"t\", \"s\"); }\n");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->path, "t.mv");
  ASSERT_EQ(p->classes.size(), 1u);
  const Klass& node = *p->classes[0];
  EXPECT_EQ(node.name, "Node");
  EXPECT_EQ(node.index, 0);
  EXPECT_EQ(node.kind, gc::LayoutKind::kFields);
  EXPECT_EQ(node.field_count, 2u);
  ASSERT_EQ(node.field_symbols.size(), 2u);
  EXPECT_EQ(p->symbols.Name(node.field_symbols[1]), "right");
  EXPECT_EQ(node.FieldIndex(p->symbols.Intern("right")), 1);
  EXPECT_THAT(p->global_names, ElementsAre("a", "b"));
  ASSERT_EQ(p->functions.size(), 3u);
  EXPECT_EQ(p->functions[0]->name, "helper");
  EXPECT_EQ(p->functions[0]->arity, 2);
  EXPECT_EQ(p->functions[0]->line, 3);
  EXPECT_EQ(p->functions[1]->name, "main");
  EXPECT_EQ(p->main_function, 1u);
  EXPECT_EQ(p->init_function, 2u);
  for (size_t i = 0; i < p->functions.size(); ++i) EXPECT_EQ(p->functions[i]->index, i);
  EXPECT_EQ(p->functions[2]->name, "<globals>");
  EXPECT_EQ(p->functions[2]->arity, 0);
  EXPECT_THAT(p->string_constants, ElementsAre("s", "t"));  // deduplicated
}

TEST(CompilerTest, GlobalInitialisersRunInSourceOrder) {
  auto p = CompileOk("var a = 1;\nvar b;\nfn main() {}\nvar c = a + f();\nfn f() { return c; }\n");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(Ops(Fn(*p, "<globals>")),
              ElementsAre("PUSH_INT 1", "STORE_GLOBAL 0", "LOAD_GLOBAL 0", "CALL 1 0", "ADD",
                          "STORE_GLOBAL 2", "PUSH_NULL", "RETURN"));
  EXPECT_THAT(Ops(Fn(*p, "f")), ElementsAre("LOAD_GLOBAL 2", "RETURN"));
}

TEST(CompilerTest, EmptyGlobalsFunctionStillExists) {
  auto p = CompileOk("fn main() {}");
  ASSERT_NE(p, nullptr);
  const Function& init = *p->functions[p->init_function];
  EXPECT_EQ(init.name, "<globals>");
  EXPECT_THAT(Ops(init), ElementsAre("PUSH_NULL", "RETURN"));
  EXPECT_THAT(Ops(Fn(*p, "main")), ElementsAre("PUSH_NULL", "RETURN"));
}

// ---------------------------------------------------------------------------
// Code shapes

TEST(CompilerTest, ExpressionStatementPops) {
  auto p = CompileOk("fn main() { 1 + 2; }");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(Ops(Fn(*p, "main")),
              ElementsAre("PUSH_INT 1", "PUSH_INT 2", "ADD", "POP", "PUSH_NULL", "RETURN"));
}

TEST(CompilerTest, NegativeLiteralsAreFolded) {
  auto p = CompileOk("fn main() { var x = -5; x = -x; x = -4611686018427387903; }");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(Ops(Fn(*p, "main")),
              ElementsAre("PUSH_INT -5", "STORE_LOCAL 0", "LOAD_LOCAL 0", "NEG", "STORE_LOCAL 0",
                          "PUSH_INT -4611686018427387903", "STORE_LOCAL 0", "PUSH_NULL", "RETURN"));
}

TEST(CompilerTest, PushIntUsesTheValueEncoding) {
  auto p = CompileOk("fn main() { return 4611686018427387903; }");
  ASSERT_NE(p, nullptr);
  const Function& main = Fn(*p, "main");
  ASSERT_EQ(main.code[0], static_cast<uint8_t>(Opcode::PUSH_INT));
  EXPECT_EQ(ReadV64(main.code.data() + 1), gc::Value::Int(gc::kMaxInt).bits());
}

TEST(CompilerTest, LogicalAndYieldsOneOrZero) {
  auto p = CompileOk("fn main() { var a; var b; return a && b; }");
  ASSERT_NE(p, nullptr);
  const Function& main = Fn(*p, "main");
  const std::vector<size_t> at = Offsets(main);
  // a; JIF F; b; JIF F; PUSH 1; JUMP End; F: PUSH 0; End: RETURN
  EXPECT_THAT(Ops(main),
              ElementsAre("PUSH_NULL", "STORE_LOCAL 0", "PUSH_NULL", "STORE_LOCAL 1",
                          "LOAD_LOCAL 0", absl::StrCat("JUMP_IF_FALSE @", at[10]), "LOAD_LOCAL 1",
                          absl::StrCat("JUMP_IF_FALSE @", at[10]), "PUSH_INT 1",
                          absl::StrCat("JUMP @", at[11]), "PUSH_INT 0", "RETURN"));
  EXPECT_EQ(main.max_stack, 1);
}

TEST(CompilerTest, LogicalOrYieldsOneOrZero) {
  const auto [ops, at] = List("fn main() { var a; var b; return a || b; }");
  ASSERT_FALSE(ops.empty());
  EXPECT_THAT(
      ops, ElementsAre("PUSH_NULL", "STORE_LOCAL 0", "PUSH_NULL", "STORE_LOCAL 1", "LOAD_LOCAL 0",
                       absl::StrCat("JUMP_IF_FALSE @", at[7]), absl::StrCat("JUMP @", at[9]),
                       "LOAD_LOCAL 1", absl::StrCat("JUMP_IF_FALSE @", at[11]), "PUSH_INT 1",
                       absl::StrCat("JUMP @", at[12]), "PUSH_INT 0", "RETURN"));
}

TEST(CompilerTest, NotAndComparisonsAreOpcodes) {
  auto p = CompileOk("fn main() { var a; return !(a < 1) == (a >= 2); }");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(Ops(Fn(*p, "main")),
              ElementsAre("PUSH_NULL", "STORE_LOCAL 0", "LOAD_LOCAL 0", "PUSH_INT 1", "LT", "NOT",
                          "LOAD_LOCAL 0", "PUSH_INT 2", "GE", "EQ", "RETURN"));
}

TEST(CompilerTest, WhileLoopUsesLoopForTheBackEdgeAndContinue) {
  const auto [ops, at] = List(
      "fn main() { var i = 0; while (i < 3) { i = i + 1; if (i == 1) { continue; } "
      "if (i == 2) { break; } } }");
  ASSERT_FALSE(ops.empty());
  const std::string cond = absl::StrCat(" @", at[2]);
  // The continue and the back edge are LOOPs to the condition.
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "LOOP" + cond), 2);
  // break is a forward JUMP past the loop.
  EXPECT_EQ(ops[ops.size() - 4], absl::StrCat("JUMP @", at[ops.size() - 2]));
  EXPECT_EQ(ops[ops.size() - 3], "LOOP" + cond);
  EXPECT_EQ(ops[ops.size() - 2], "PUSH_NULL");
  for (const std::string& op : ops) {
    if (op.rfind("JUMP", 0) == 0) {
      const size_t target = std::stoul(op.substr(op.find('@') + 1));
      EXPECT_GT(target, at[2]) << op;  // every JUMP is forward
    }
  }
}

TEST(CompilerTest, ForLoopContinueRunsTheStep) {
  const auto [ops, at] = List(
      "fn main() { for (var i = 0; i < 3; i = i + 1) { if (i == 1) { continue; } print(i); } }");
  ASSERT_FALSE(ops.empty());
  ASSERT_EQ(ops.size(), 21u);
  EXPECT_EQ(ops[10], absl::StrCat("JUMP @", at[14]));  // continue -> step
  EXPECT_EQ(ops[18], absl::StrCat("LOOP @", at[2]));   // back edge -> condition
  EXPECT_EQ(ops[5], absl::StrCat("JUMP_IF_FALSE @", at[19]));
  EXPECT_EQ(ops[19], "PUSH_NULL");
  EXPECT_EQ(ops[20], "RETURN");
}

TEST(CompilerTest, ForWithoutStepContinuesBackwards) {
  auto p = CompileOk("fn main() { for (;;) { continue; } }");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(Ops(Fn(*p, "main")), ElementsAre("LOOP @0", "LOOP @0", "PUSH_NULL", "RETURN"));
}

TEST(CompilerTest, IfElseChain) {
  const auto [ops, at] = List(
      "fn f(x) { if (x == 1) { return 10; } else if (x == 2) { return 20; } else { return 30; } "
      "}\nfn main() {}",
      "f");
  ASSERT_FALSE(ops.empty());
  // Every branch returns: no jumps to the end, no trailing return.
  EXPECT_THAT(
      ops, ElementsAre("LOAD_LOCAL 0", "PUSH_INT 1", "EQ", absl::StrCat("JUMP_IF_FALSE @", at[6]),
                       "PUSH_INT 10", "RETURN", "LOAD_LOCAL 0", "PUSH_INT 2", "EQ",
                       absl::StrCat("JUMP_IF_FALSE @", at[12]), "PUSH_INT 20", "RETURN",
                       "PUSH_INT 30", "RETURN"));
}

TEST(CompilerTest, DeadCodeAtTheEndStillEndsWithReturn) {
  auto p = CompileOk("fn main() { { return 1; } print(2); }");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(Ops(Fn(*p, "main")), ElementsAre("PUSH_INT 1", "RETURN", "PUSH_INT 2",
                                               "CALL_BUILTIN 0 1", "POP", "PUSH_NULL", "RETURN"));
}

TEST(CompilerTest, IfWithoutElseFallsThrough) {
  const auto [ops, at] = List("fn f(x) { if (x) { x = 1; } else { x = 2; } }\nfn main() {}", "f");
  ASSERT_FALSE(ops.empty());
  EXPECT_THAT(ops, ElementsAre("LOAD_LOCAL 0", absl::StrCat("JUMP_IF_FALSE @", at[5]), "PUSH_INT 1",
                               "STORE_LOCAL 0", absl::StrCat("JUMP @", at[7]), "PUSH_INT 2",
                               "STORE_LOCAL 0", "PUSH_NULL", "RETURN"));
}

TEST(CompilerTest, FieldsAndIndexing) {
  auto p = CompileOk(
      "class P { x, y }\n"
      "fn main() { var p = new P(1); p.y = p.x; var a = array(2); a[0] = a[1]; }");
  ASSERT_NE(p, nullptr);
  const Function& main = Fn(*p, "main");
  const uint32_t x = p->symbols.Intern("x");
  const uint32_t y = p->symbols.Intern("y");
  const uint8_t array = static_cast<uint8_t>(Builtin::k_array);
  EXPECT_THAT(Ops(main),
              ElementsAre("NEW 0 0", "PUSH_INT 1", "INIT_FIELDS 0 1", "STORE_LOCAL 0", "LOAD_LOCAL 0", "LOAD_LOCAL 0",
                          absl::StrCat("GET_FIELD ", x, " 0"), absl::StrCat("SET_FIELD ", y, " 1"),
                          "PUSH_INT 2", absl::StrCat("CALL_BUILTIN ", array, " 1"), "STORE_LOCAL 1",
                          "LOAD_LOCAL 1", "PUSH_INT 0", "LOAD_LOCAL 1", "PUSH_INT 1", "GET_INDEX",
                          "SET_INDEX", "PUSH_NULL", "RETURN"));
  EXPECT_EQ(main.num_field_caches, 2u);
  ASSERT_NE(main.field_caches, nullptr);
  EXPECT_EQ(main.field_caches[1].Lookup(p->classes[0].get()), -1);
}

TEST(CompilerTest, CallsNewAndSpawn) {
  auto p = CompileOk(
      "class C { a }\nfn w(x) { return x; }\n"
      "fn main() { var t = spawn w(1); print(join(t), w(2), new C()); }");
  ASSERT_NE(p, nullptr);
  const uint8_t print = static_cast<uint8_t>(Builtin::k_print);
  const uint8_t join = static_cast<uint8_t>(Builtin::k_join);
  EXPECT_THAT(
      Ops(Fn(*p, "main")),
      ElementsAre("PUSH_INT 1", "SPAWN 0 1", "STORE_LOCAL 0", "LOAD_LOCAL 0",
                  absl::StrCat("CALL_BUILTIN ", join, " 1"), "PUSH_INT 2", "CALL 0 1", "NEW 0 0",
                  absl::StrCat("CALL_BUILTIN ", print, " 3"), "POP", "PUSH_NULL", "RETURN"));
  EXPECT_EQ(Fn(*p, "main").max_stack, 3);
}

TEST(CompilerTest, LocalsAndSlotReuse) {
  auto p = CompileOk(
      "fn f(a, b) { var c = 1; { var d = 2; var e = 3; } { var g = 4; } var h = 5; }\n"
      "fn main() {}");
  ASSERT_NE(p, nullptr);
  const Function& f = Fn(*p, "f");
  EXPECT_EQ(f.arity, 2);
  EXPECT_EQ(f.num_locals, 5);  // a b c + d e (g reuses d's slot, h e's)
  EXPECT_THAT(Ops(f), ElementsAre("PUSH_INT 1", "STORE_LOCAL 2", "PUSH_INT 2", "STORE_LOCAL 3",
                                  "PUSH_INT 3", "STORE_LOCAL 4", "PUSH_INT 4", "STORE_LOCAL 3",
                                  "PUSH_INT 5", "STORE_LOCAL 3", "PUSH_NULL", "RETURN"));
}

TEST(CompilerTest, ShadowingAndInitialiserSeesOuterName) {
  auto p = CompileOk("var x = 1;\nfn main() { var x = x; { var x = x + 1; print(x); } }");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(Ops(Fn(*p, "main")), ElementsAre("LOAD_GLOBAL 0", "STORE_LOCAL 0", "LOAD_LOCAL 0",
                                               "PUSH_INT 1", "ADD", "STORE_LOCAL 1", "LOAD_LOCAL 1",
                                               "CALL_BUILTIN 0 1", "POP", "PUSH_NULL", "RETURN"));
}

TEST(CompilerTest, VarWithoutInitialiserStoresNull) {
  auto p = CompileOk("fn main() { while (1) { var x; x = 1; } }");
  ASSERT_NE(p, nullptr);
  const std::vector<std::string> ops = Ops(Fn(*p, "main"));
  EXPECT_EQ(ops[2], "PUSH_NULL");
  EXPECT_EQ(ops[3], "STORE_LOCAL 0");
}

TEST(CompilerTest, FunctionsAndVariablesAreSeparateNamespaces) {
  auto p = CompileOk("var print = 1;\nfn main() { var len = 3; print(len(\"ab\"), len, print); }");
  ASSERT_NE(p, nullptr);
}

TEST(CompilerTest, MaxStackCountsNestedOperands) {
  auto p = CompileOk("fn f(a, b, c) { return a; }\nfn main() { return 1 + f(2, 3, 4 * (5 - 6)); }");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Fn(*p, "main").max_stack, 6);  // 1, 2, 3, 4, 5, 6
}

TEST(CompilerTest, LineTableFollowsTheProducingToken) {
  auto p = CompileOk(
      "class C { f }\n"
      "fn main() {\n"
      "  var c = new C(1);\n"
      "  var x = 1 +\n"
      "    c\n"
      "      .f;\n"
      "  print(\n"
      "    x);\n"
      "}\n");
  ASSERT_NE(p, nullptr);
  const Function& main = Fn(*p, "main");
  std::vector<std::pair<std::string, int>> lines;
  for (size_t pc = 0; pc < main.code.size();) {
    const OpcodeInfo& info = GetOpcodeInfo(static_cast<Opcode>(main.code[pc]));
    lines.emplace_back(std::string(info.name), main.lines.LineFor(pc));
    pc += info.length;
  }
  using P = std::pair<std::string, int>;
  EXPECT_THAT(lines,
              ElementsAre(P("NEW", 3), P("PUSH_INT", 3), P("INIT_FIELDS", 3), P("STORE_LOCAL", 3),
                          P("PUSH_INT", 4),
                          P("LOAD_LOCAL", 5), P("GET_FIELD", 6), P("ADD", 4), P("STORE_LOCAL", 4),
                          P("LOAD_LOCAL", 8), P("CALL_BUILTIN", 7), P("POP", 7), P("PUSH_NULL", 9),
                          P("RETURN", 9)));
  EXPECT_EQ(main.lines.entries().front().first, 0u);
}

// ---------------------------------------------------------------------------
// Errors

TEST(CompilerTest, UnknownNames) {
  EXPECT_THAT(Errors("fn main() {\n  print(x);\n  y = 1;\n  g();\n  new Q();\n}"),
              ElementsAre("2:9: unknown variable 'x'", "3:3: unknown variable 'y'",
                          "4:3: unknown function 'g'", "5:7: unknown class 'Q'"));
}

TEST(CompilerTest, ArityErrors) {
  EXPECT_THAT(Errors("fn f(a, b) {}\nclass Node { a, b, c }\nfn main() {\n"
                     "  f(1, 2, 3);\n  f(1);\n  len();\n  assert(1, 2, 3);\n  spawn f();\n"
                     "  new Node(1, 2, 3, 4);\n  args(1);\n}"),
              ElementsAre("4:3: function 'f' takes 2 arguments, got 3",
                          "5:3: function 'f' takes 2 arguments, got 1",
                          "6:3: function 'len' takes 1 argument, got 0",
                          "7:3: function 'assert' takes 1 to 2 arguments, got 3",
                          "8:9: function 'f' takes 2 arguments, got 0",
                          "9:7: class 'Node' has 3 fields, got 4 arguments",
                          "10:3: function 'args' takes 0 arguments, got 1"));
}

TEST(CompilerTest, UnknownNamesAreReportedOncePerFunction) {
  EXPECT_THAT(
      Errors("fn f() { return i; }\nfn main() {\n  for (i = 0; i < 3; i = i + 1) { g(); g(); }\n}"),
      ElementsAre("1:17: unknown variable 'i'", "3:8: unknown variable 'i'",
                  "3:35: unknown function 'g'"));
}

TEST(CompilerTest, BreakAndContinueOutsideALoop) {
  EXPECT_THAT(Errors("fn main() {\n  break;\n  if (1) { continue; }\n  while (1) { break; }\n}"),
              ElementsAre("2:3: 'break' outside a loop", "3:12: 'continue' outside a loop"));
}

TEST(CompilerTest, NoMainIsReportedAtTheStart) {
  EXPECT_THAT(Errors("fn helper() {}\n"), ElementsAre("1:1: no 'main' function"));
  EXPECT_THAT(Errors(""), ElementsAre("1:1: no 'main' function"));
  EXPECT_THAT(Errors("fn main(a) {}"), ElementsAre("1:4: 'main' must take no parameters"));
}

TEST(CompilerTest, FunctionsAndClassesAreNotValues) {
  EXPECT_THAT(
      Errors("class C {}\nfn f() {}\nfn main() {\n  var a = f;\n  a = C;\n  a = print;\n"
             "  f = 1;\n  a();\n  C();\n}"),
      ElementsAre("4:11: 'f' is a function, not a value", "5:7: 'C' is a class, not a value",
                  "6:7: 'print' is a function, not a value", "7:3: 'f' is a function, not a value",
                  "8:3: 'a' is a variable, not a function",
                  "9:3: 'C' is a class: create instances with 'new C(...)'"));
}

TEST(CompilerTest, SpawnNeedsAUserFunction) {
  EXPECT_THAT(Errors("fn main() { spawn print(1); }"),
              ElementsAre("1:19: 'spawn' needs a user function; 'print' is a built-in"));
}

TEST(CompilerTest, Redefinitions) {
  EXPECT_THAT(Errors("fn f(a, a) { var b; var b; { var b; } }\n"
                     "fn f() {}\nvar f;\nclass f {}\nclass D { x, x }\n"
                     "fn len() {}\nclass print {}\nvar len = 1;\nfn main() {}"),
              ElementsAre("1:9: redefinition of 'a'", "1:25: redefinition of 'b'",
                          "2:4: redefinition of 'f'", "3:5: redefinition of 'f'",
                          "4:7: redefinition of 'f'", "5:14: redefinition of field 'x'",
                          "6:4: cannot redefine built-in function 'len'",
                          "7:7: cannot redefine built-in function 'print'"));
}

TEST(CompilerTest, ParameterAndBodyShareAScope) {
  EXPECT_THAT(Errors("fn f(a) { var a = 1; }\nfn main() {}"),
              ElementsAre("1:15: redefinition of 'a'"));
}

TEST(CompilerTest, UseBeforeDeclaration) {
  EXPECT_THAT(Errors("fn main() { print(g, f(), new C()); }\nfn f() { return 1; }\n"
                     "class C {}\nvar g = 2;"),
              IsEmpty());
}

TEST(CompilerTest, LocalsAreBlockScoped) {
  EXPECT_THAT(Errors("fn main() {\n  { var x = 1; }\n  print(x);\n"
                     "  for (var i = 0; i < 1; i = i + 1) {}\n  print(i);\n}"),
              ElementsAre("3:9: unknown variable 'x'", "5:9: unknown variable 'i'"));
}

TEST(CompilerTest, AllErrorsInSourceOrder) {
  EXPECT_THAT(Errors("fn main() {\n  var s = \"a\\q\";\n  print(1 2);\n  unknown();\n"
                     "  var n = 99999999999999999999;\n  break;\n}"),
              ElementsAre("2:13: invalid escape '\\q'", "3:11: expected ')' after arguments",
                          "4:3: unknown function 'unknown'", "5:11: integer literal too large",
                          "6:3: 'break' outside a loop"));
}

TEST(CompilerTest, NoCascadeAfterBrokenDeclarations) {
  // The broken var still declares x; the broken header still declares f.
  EXPECT_THAT(Errors("fn f(a, {\n}\nfn main() {\n  var x = 1 +;\n  print(x, f(1, 2, 3));\n}"),
              ElementsAre("1:9: expected parameter name", "4:14: expected expression"));
}

TEST(CompilerTest, FormatDiagnostic) {
  EXPECT_EQ(FormatDiagnostic("prog.mv", Diagnostic{3, 14, "expected ';' after expression"}),
            "prog.mv:3:14: error: expected ';' after expression");
}

TEST(CompilerTest, EncodingLimits) {
  std::string many_args = "fn main() { print(";
  for (int i = 0; i < 256; ++i) absl::StrAppend(&many_args, i == 0 ? "" : ", ", i);
  many_args += "); }";
  std::vector<std::string> errors = Errors(many_args);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], ::testing::HasSubstr("too many arguments (max 255)"));

  std::string ok_args = "fn main() { print(";
  for (int i = 0; i < 255; ++i) absl::StrAppend(&ok_args, i == 0 ? "" : ", ", i);
  ok_args += "); }";
  EXPECT_THAT(Errors(ok_args), IsEmpty());

  std::string many_params = "fn f(";
  for (int i = 0; i < 256; ++i) absl::StrAppend(&many_params, i == 0 ? "" : ", ", "p", i);
  many_params += ") {}\nfn main() {}";
  errors = Errors(many_params);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], ::testing::HasSubstr("too many parameters (max 255)"));
}

TEST(CompilerTest, TooManyLocals) {
  std::string src = "fn main() {\n";
  for (int i = 0; i < 65536; ++i) absl::StrAppend(&src, "var v", i, ";\n");
  src += "}";
  std::vector<std::string> errors = Errors(src);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "65537:5: too many local variables in function 'main' (max 65535)");
}

TEST(CompilerTest, LongChainsCompileWithoutRecursion) {
  std::string sum = "fn main() { var a = 1; return a";
  for (int i = 0; i < 200000; ++i) sum += " + a";
  sum += "; }";
  auto p = CompileOk(sum);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Fn(*p, "main").max_stack, 2);

  std::string logic = "fn main() { var a = 1; return a";
  for (int i = 0; i < 100000; ++i) logic += i % 2 ? " && a" : " || a";
  logic += "; }";
  EXPECT_NE(CompileOk(logic), nullptr);

  std::string fields = "class C { f }\nfn main() { var a; return a";
  for (int i = 0; i < 200000; ++i) fields += ".f";
  fields += "; }";
  p = CompileOk(fields);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Fn(*p, "main").num_field_caches, 200000u);
}

TEST(CompilerTest, NeverCrashesOnJunk) {
  const std::string inputs[] = {
      std::string("\0\0\0", 3),
      "\xff\xfe",
      "fn",
      "fn main",
      "fn main(",
      "fn main() {",
      "class",
      "class C {",
      "var",
      "var x =",
      "}}}}",
      "((((",
      "fn main() { return",
      "\"",
      "fn main() { x = \"\\",
      "fn main() { a.; }",
      "fn main() { new; spawn; }",
      "fn main() { for (var i = 0 i < 1) {} }",
      "fn main() { if () {} else }",
  };
  for (const std::string& src : inputs) {
    CompileResult r = Compile("t.mv", src);
    EXPECT_EQ(r.program, nullptr) << src;
    EXPECT_FALSE(r.errors.empty()) << src;
    for (const Diagnostic& d : r.errors) {
      EXPECT_GE(d.line, 1);
      EXPECT_GE(d.column, 1);
    }
  }
}

TEST(CompilerTest, ErrorsStopAfterTheLimitWithTooManyErrors) {
  // Like a binary file: every other byte an error.
  std::string source = "fn main() { }\n";
  for (int i = 0; i < 1000; ++i) source += "@ $\n";
  CompileResult r = Compile("t.mv", source);
  EXPECT_EQ(r.program, nullptr);
  ASSERT_EQ(r.errors.size(), kMaxReportedErrors + 1);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_EQ(r.errors.back().message, "too many errors");
  // At the position of the first error left out: two per line from line
  // 2, so the 21st is line 12's '@'.
  EXPECT_EQ(r.errors.back().line, 12);
  EXPECT_EQ(r.errors.back().column, 1);
}

TEST(CompilerTest, ExactlyTheLimitIsReportedInFull) {
  std::string source = "fn main() { }\n";
  for (size_t i = 0; i < kMaxReportedErrors; ++i) source += "@\n";
  CompileResult r = Compile("t.mv", source);
  ASSERT_EQ(r.errors.size(), kMaxReportedErrors);
  EXPECT_NE(r.errors.back().message, "too many errors");
}

}  // namespace
}  // namespace minivm
