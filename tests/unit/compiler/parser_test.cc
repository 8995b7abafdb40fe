#include "vm/compiler/parser.h"

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

TEST(ParserTest, MissingSemicolonIsReportedAtTheOffendingToken) {
  Parsed p = ParseBody("print(1)\nprint(2);");
  EXPECT_THAT(p.errors, ElementsAre("3:1: expected ';' after expression"));
}

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

TEST(ParserTest, MissingCloseBraceBeforeNextFunction) {
  Parsed p = ParseSource("fn f() {\n  if (x) {\n    print(1);\n\nfn main() { }\n");
  EXPECT_THAT(p.errors, ElementsAre("5:1: expected '}' at end of block"));
  EXPECT_EQ(p.result.module.functions.size(), 2u);
}

TEST(ParserTest, MissingCloseBraceAtEnd) {
  Parsed p = ParseSource("fn main() {\n  while (1) {\n");
  EXPECT_THAT(p.errors, ElementsAre("3:1: expected '}' at end of block"));
}

TEST(ParserTest, LexicalErrorsAreNotRepeated) {
  Parsed p = ParseBody("var x = 1 @ 2;\nprint(x);");
  EXPECT_THAT(p.errors, ElementsAre("2:11: unexpected character '@'"));
}

TEST(ParserTest, UnterminatedStringDoesNotCascade) {
  Parsed multi = ParseBody("print(\"abc);\nprint(2);");
  EXPECT_THAT(multi.errors, ElementsAre("2:7: unterminated string"));
  Parsed last = ParseSource("fn main() { print(\"abc); }");
  EXPECT_THAT(last.errors, ElementsAre("1:19: unterminated string"));
}

TEST(ParserTest, MissingBraceBeforeElse) {
  Parsed p = ParseBody("if (1) {\n  print(1);\nelse {\n  print(2);\n}");
  EXPECT_THAT(p.errors, ElementsAre("4:1: expected '}' before 'else'"));
  const Stmt* s = p.result.module.functions[0].body->stmts[0];
  EXPECT_NE(s->else_body, nullptr);
}

TEST(ParserTest, ElseWithoutIf) {
  Parsed p = ParseBody("else { print(1); }\nprint(2);");
  EXPECT_THAT(p.errors, ElementsAre("2:1: 'else' without a matching 'if'"));
}

TEST(ParserTest, NestedDeclarationsAreSkippedWhole) {
  Parsed p = ParseBody("  fn inner(a) { return a + ; }\n  class K { x }\n  print(1);");
  EXPECT_THAT(p.errors, ElementsAre("2:3: functions can only be declared at the top level",
                                    "3:3: classes can only be declared at the top level"));
  EXPECT_EQ(p.result.module.functions.size(), 1u);
  EXPECT_EQ(p.result.module.functions[0].body->stmts.size(), 1u);
}

TEST(ParserTest, KeywordsAreNotNames) {
  Parsed p = ParseSource(
      "fn f(null) { return 1; }\nclass A { x, new }\nfn main() {\n  var while = 1;\n}\n");
  EXPECT_THAT(p.errors,
              ElementsAre("1:6: expected parameter name ('null' is a keyword)",
                          "2:14: expected field name ('new' is a keyword)",
                          "4:7: expected variable name after 'var' ('while' is a keyword)"));
}

TEST(ParserTest, MethodInClassIsOneError) {
  Parsed p = ParseSource("class A { x, fn get() { return 1; } }\nfn main() {}\n");
  EXPECT_THAT(p.errors, ElementsAre("1:14: expected field name (classes have no methods)"));
  EXPECT_EQ(p.result.module.functions.size(), 1u);
}

TEST(ParserTest, SingleQuotedStringIsOneError) {
  Parsed p = ParseBody("print('abc');");
  EXPECT_THAT(p.errors, ElementsAre("2:7: unexpected character \"'\" (strings use double quotes)"));
}

TEST(ParserTest, AssignmentInCondition) {
  Parsed p = ParseBody("if (x = 1) { }\nwhile (y = 2) { }");
  EXPECT_THAT(p.errors, ElementsAre("2:7: expected ')' after condition (use '==' to compare)",
                                    "3:10: expected ')' after condition (use '==' to compare)"));
}

TEST(ParserTest, InvalidAssignmentTarget) {
  Parsed p = ParseBody("f() = 1;\n1 + 2 = 3;\na.b = 1; a[0] = 2; a = 3;");
  EXPECT_THAT(p.errors,
              ElementsAre("2:5: invalid assignment target", "3:7: invalid assignment target"));
}

TEST(ParserTest, OnlyNamesCanBeCalled) {
  Parsed p = ParseBody("a.b(1);\nf(1)(2);");
  EXPECT_THAT(p.errors, ElementsAre("2:4: only a function name can be called",
                                    "3:5: only a function name can be called"));
}

TEST(ParserTest, BlocksNeedBraces) {
  Parsed p = ParseBody("if (x) print(1);\nwhile (x) y = 1;");
  EXPECT_THAT(p.errors, ElementsAre("2:8: expected '{' after condition",
                                    "3:11: expected '{' after condition"));
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
