#include "vm/compiler/parser.h"

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace minivm::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Parsed {
  ParseResult result;
  std::vector<std::string> errors;
};

Parsed ParseSource(std::string_view source) {
  std::vector<Diagnostic> diagnostics;
  Parsed p{Parse(source, &diagnostics), {}};
  for (const Diagnostic& d : diagnostics) {
    p.errors.push_back(std::to_string(d.line) + ":" + std::to_string(d.column) + ": " + d.message);
  }
  return p;
}

// The body of `fn main() { <body> }`.
Parsed ParseBody(std::string_view body) {
  return ParseSource(std::string("fn main() {\n") + std::string(body) + "\n}\n");
}

TEST(ParserTest, Declarations) {
  Parsed p = ParseSource(
      "class Node { left, right }\n"
      "class Empty {}\n"
      "var counter = 0;\n"
      "var unset;\n"
      "fn make(a, b) { return a; }\n"
      "fn main() {}\n");
  EXPECT_THAT(p.errors, IsEmpty());
  EXPECT_FALSE(p.result.had_errors);
  const Module& m = p.result.module;
  ASSERT_EQ(m.decls.size(), 6u);
  ASSERT_EQ(m.classes.size(), 2u);
  EXPECT_EQ(m.classes[0].name.text, "Node");
  ASSERT_EQ(m.classes[0].fields.size(), 2u);
  EXPECT_EQ(m.classes[0].fields[1].text, "right");
  EXPECT_TRUE(m.classes[1].fields.empty());
  ASSERT_EQ(m.globals.size(), 2u);
  EXPECT_NE(m.globals[0].init, nullptr);
  EXPECT_EQ(m.globals[1].init, nullptr);
  ASSERT_EQ(m.functions.size(), 2u);
  EXPECT_EQ(m.functions[0].params.size(), 2u);
  EXPECT_EQ(m.functions[0].pos.line, 5);
  EXPECT_EQ(m.decls[2].kind, DeclKind::kGlobal);
}

TEST(ParserTest, PrecedenceAndAssociativity) {
  Parsed p = ParseBody("x = 1 + 2 * 3 - 4 < 5 == 6 && 7 || 8;");
  ASSERT_THAT(p.errors, IsEmpty());
  const Stmt* s = p.result.module.functions[0].body->stmts[0];
  ASSERT_EQ(s->kind, StmtKind::kAssign);
  const Expr* e = s->expr;
  EXPECT_EQ(e->op, TokenKind::kOrOr);
  EXPECT_EQ(e->left->op, TokenKind::kAndAnd);
  const Expr* eq = e->left->left;
  EXPECT_EQ(eq->op, TokenKind::kEq);
  const Expr* lt = eq->left;
  EXPECT_EQ(lt->op, TokenKind::kLt);
  const Expr* minus = lt->left;  // (1 + 2*3) - 4: left-associative
  EXPECT_EQ(minus->op, TokenKind::kMinus);
  EXPECT_EQ(minus->left->op, TokenKind::kPlus);
  EXPECT_EQ(minus->left->right->op, TokenKind::kStar);
}

TEST(ParserTest, PostfixAndUnary) {
  Parsed p = ParseBody("x = -a.b[1].c; y = !f(1, g(2)); z = new Node(1); t = spawn w();");
  ASSERT_THAT(p.errors, IsEmpty());
  const auto& stmts = p.result.module.functions[0].body->stmts;
  const Expr* neg = stmts[0]->expr;
  EXPECT_EQ(neg->kind, ExprKind::kUnary);
  EXPECT_EQ(neg->left->kind, ExprKind::kField);
  EXPECT_EQ(neg->left->text, "c");
  EXPECT_EQ(neg->left->left->kind, ExprKind::kIndex);
  const Expr* call = stmts[1]->expr->left;
  EXPECT_EQ(call->kind, ExprKind::kCall);
  EXPECT_EQ(call->args.size(), 2u);
  EXPECT_EQ(stmts[2]->expr->kind, ExprKind::kNew);
  EXPECT_EQ(stmts[3]->expr->kind, ExprKind::kSpawn);
}

TEST(ParserTest, ElseIfChainIsOneStatement) {
  Parsed p = ParseBody("if (a) { } else if (b) { } else if (c) { } else { }");
  ASSERT_THAT(p.errors, IsEmpty());
  const Stmt* s = p.result.module.functions[0].body->stmts[0];
  EXPECT_EQ(s->clauses.size(), 3u);
  EXPECT_NE(s->else_body, nullptr);
}

TEST(ParserTest, ForClausesMayBeEmpty) {
  Parsed p = ParseBody(
      "for (;;) { break; }\n"
      "for (var i = 0; i < 3; i = i + 1) { continue; }\n"
      "for (i = 0; ; f()) { }");
  ASSERT_THAT(p.errors, IsEmpty());
  const auto& stmts = p.result.module.functions[0].body->stmts;
  EXPECT_EQ(stmts[0]->init, nullptr);
  EXPECT_EQ(stmts[0]->expr, nullptr);
  EXPECT_EQ(stmts[0]->step, nullptr);
  EXPECT_EQ(stmts[1]->init->kind, StmtKind::kVar);
  EXPECT_EQ(stmts[2]->init->kind, StmtKind::kAssign);
  EXPECT_EQ(stmts[2]->step->kind, StmtKind::kExpr);
}

// Mistakes, each with the diagnostics it must give: reported once, where it
// is, in the user's terms, and the parse recovering for the rest. `body`
// cases are the body of `fn main() { ... }` (so their line numbers start at
// 2); `functions`, where set, is how many functions the parse keeps.
struct ErrorCase {
  const char* name;
  bool body;
  std::string_view source;
  std::vector<std::string> errors;
  int functions = -1;
};

// Shown for a failing case (gtest would print the struct's bytes).
void PrintTo(const ErrorCase& c, std::ostream* os) {
  *os << (c.body ? "main's body " : "source ") << ::testing::PrintToString(std::string(c.source));
}

class ParserErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ParserErrorTest, GivesTheseDiagnostics) {
  const ErrorCase& c = GetParam();
  Parsed p = c.body ? ParseBody(c.source) : ParseSource(c.source);
  EXPECT_EQ(p.errors, c.errors);
  if (c.functions >= 0) {
    EXPECT_EQ(p.result.module.functions.size(), static_cast<size_t>(c.functions));
  }
}

// One case a line or two reads better than one field a line.
// clang-format off
const ErrorCase kErrorCases[] = {
    {"MissingSemicolonIsReportedAtTheOffendingToken", true, "print(1)\nprint(2);",
     {"3:1: expected ';' after expression"}},
    {"MissingCloseBraceBeforeNextFunction", false,
     "fn f() {\n  if (x) {\n    print(1);\n\nfn main() { }\n",
     {"5:1: expected '}' at end of block"}, 2},
    {"MissingCloseBraceAtEnd", false, "fn main() {\n  while (1) {\n",
     {"3:1: expected '}' at end of block"}},
    {"LexicalErrorsAreNotRepeated", true, "var x = 1 @ 2;\nprint(x);",
     {"2:11: unexpected character '@'"}},
    {"UnterminatedStringDoesNotCascade", true, "print(\"abc);\nprint(2);",
     {"2:7: unterminated string"}},
    {"UnterminatedStringOnTheLastLine", false, "fn main() { print(\"abc); }",
     {"1:19: unterminated string"}},
    {"ElseWithoutIf", true, "else { print(1); }\nprint(2);",
     {"2:1: 'else' without a matching 'if'"}},
    {"KeywordsAreNotNames", false,
     "fn f(null) { return 1; }\nclass A { x, new }\nfn main() {\n  var while = 1;\n}\n",
     {"1:6: expected parameter name ('null' is a keyword)",
      "2:14: expected field name ('new' is a keyword)",
      "4:7: expected variable name after 'var' ('while' is a keyword)"}},
    {"MethodInClassIsOneError", false, "class A { x, fn get() { return 1; } }\nfn main() {}\n",
     {"1:14: expected field name (classes have no methods)"}, 1},
    {"SingleQuotedStringIsOneError", true, "print('abc');",
     {"2:7: unexpected character \"'\" (strings use double quotes)"}},
    {"AssignmentInCondition", true, "if (x = 1) { }\nwhile (y = 2) { }",
     {"2:7: expected ')' after condition (use '==' to compare)",
      "3:10: expected ')' after condition (use '==' to compare)"}},
    {"InvalidAssignmentTarget", true, "f() = 1;\n1 + 2 = 3;\na.b = 1; a[0] = 2; a = 3;",
     {"2:5: invalid assignment target", "3:7: invalid assignment target"}},
    {"OnlyNamesCanBeCalled", true, "a.b(1);\nf(1)(2);",
     {"2:4: only a function name can be called", "3:5: only a function name can be called"}},
    {"BlocksNeedBraces", true, "if (x) print(1);\nwhile (x) y = 1;",
     {"2:8: expected '{' after condition", "3:11: expected '{' after condition"}},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Mistakes, ParserErrorTest, ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(ParserTest, RecoversAtStatementBoundaries) {
  Parsed p = ParseBody(
      "var a = ;\n"
      "print(a;\n"
      "if (a > ) { print(1); }\n"
      "a = 1 +;\n"
      "print(a);");
  EXPECT_THAT(p.errors, ElementsAre("2:9: expected expression", "3:8: expected ')' after arguments",
                                    "4:9: expected expression", "5:8: expected expression"));
  // The good statement at the end, and the broken `var a`, survive.
  const auto& stmts = p.result.module.functions[0].body->stmts;
  ASSERT_EQ(stmts.size(), 2u);
  EXPECT_EQ(stmts[0]->kind, StmtKind::kVar);
  EXPECT_EQ(stmts[1]->kind, StmtKind::kExpr);
}

TEST(ParserTest, RecoversAtDeclarations) {
  Parsed p = ParseSource(
      "fn f( { return 1; }\n"
      "class C { a b }\n"
      "var = 3;\n"
      "42;\n"
      "fn main() { }\n");
  EXPECT_THAT(p.errors, ElementsAre("1:7: expected parameter name",
                                    "2:13: expected ',' or '}' after field name",
                                    "3:5: expected variable name after 'var'",
                                    "4:1: expected 'class', 'fn' or 'var' at top level"));
  ASSERT_EQ(p.result.module.functions.size(), 2u);
  EXPECT_TRUE(p.result.module.functions[0].malformed);
  EXPECT_EQ(p.result.module.functions[1].name.text, "main");
}

TEST(ParserTest, MissingBraceBeforeElse) {
  Parsed p = ParseBody("if (1) {\n  print(1);\nelse {\n  print(2);\n}");
  EXPECT_THAT(p.errors, ElementsAre("4:1: expected '}' before 'else'"));
  const Stmt* s = p.result.module.functions[0].body->stmts[0];
  EXPECT_NE(s->else_body, nullptr);
}

TEST(ParserTest, NestedDeclarationsAreSkippedWhole) {
  Parsed p = ParseBody("  fn inner(a) { return a + ; }\n  class K { x }\n  print(1);");
  EXPECT_THAT(p.errors, ElementsAre("2:3: functions can only be declared at the top level",
                                    "3:3: classes can only be declared at the top level"));
  EXPECT_EQ(p.result.module.functions.size(), 1u);
  EXPECT_EQ(p.result.module.functions[0].body->stmts.size(), 1u);
}

std::string Repeat(std::string_view s, int n) {
  std::string out;
  out.reserve(s.size() * n);
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(ParserTest, NestingAtTheLimitIsAccepted) {
  Parsed parens = ParseBody("x = " + Repeat("(", 256) + "1" + Repeat(")", 256) + ";");
  EXPECT_THAT(parens.errors, IsEmpty());
  Parsed blocks = ParseBody(Repeat("{", 255) + Repeat("}", 255));
  EXPECT_THAT(blocks.errors, IsEmpty());
  Parsed unary = ParseBody("x = " + Repeat("-", 256) + "1;");
  EXPECT_THAT(unary.errors, IsEmpty());
}

TEST(ParserTest, NestingTooDeep) {
  Parsed parens = ParseBody("x = " + Repeat("(", 257) + "1" + Repeat(")", 257) + ";");
  EXPECT_THAT(parens.errors, ElementsAre("2:262: nesting too deep"));
  EXPECT_TRUE(parens.result.abandoned);
  Parsed blocks = ParseBody(Repeat("{", 256) + Repeat("}", 256));
  EXPECT_THAT(blocks.errors, ElementsAre("2:256: nesting too deep"));
}

TEST(ParserTest, HugeNestingDoesNotOverflowTheStack) {
  for (std::string_view open : {"(", "-", "!", "f(", "a[", "new C(", "spawn f("}) {
    Parsed p = ParseBody("x = " + Repeat(open, 100000));
    ASSERT_EQ(p.errors.size(), 1u) << open;
    EXPECT_THAT(p.errors[0], ::testing::EndsWith("nesting too deep")) << open;
  }
  Parsed blocks = ParseBody(Repeat("{", 100000) + Repeat("}", 100000));
  EXPECT_THAT(blocks.errors, ElementsAre("2:256: nesting too deep"));
  Parsed ifs = ParseBody(Repeat("if (1) {", 100000));
  ASSERT_EQ(ifs.errors.size(), 1u);
  EXPECT_THAT(ifs.errors[0], ::testing::EndsWith("nesting too deep"));
}

TEST(ParserTest, LongLeftNestedChainsNeedNoRecursion) {
  Parsed sum = ParseBody("x = 1" + Repeat(" + 1", 200000) + ";");
  EXPECT_THAT(sum.errors, IsEmpty());
  Parsed fields = ParseBody("x = a" + Repeat(".b", 200000) + ";");
  EXPECT_THAT(fields.errors, IsEmpty());
  Parsed chain = ParseBody("if (a) {}" + Repeat(" else if (a) {}", 100000));
  EXPECT_THAT(chain.errors, IsEmpty());
}

}  // namespace
}  // namespace minivm::compiler
