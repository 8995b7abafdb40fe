// The parser: tokens to a Module (ast.h), by recursive descent.
//
// Error recovery is panic mode: the first error in a statement or declaration
// is reported, later ones are suppressed until the parser resynchronises at a
// statement boundary (after ';', before '}' or a statement keyword, skipping
// balanced braces) or, at the top level, at the next declaration. Statements
// that fail to parse are dropped, except that a broken `var x = ...;` still
// declares x and a broken function header still declares the function, so
// that the name resolver does not add "unknown variable" noise.
//
// Recursion is bounded: blocks and expressions may each nest at most
// kMaxNesting deep. Past that the parser reports "nesting too deep" and stops
// (the rest of the file is not parsed), which keeps the native stack safe on
// inputs such as 100k open parentheses. Left-nested chains (a+b+c, a.b.c,
// else-if) are built by loops and need no recursion.
#ifndef MINIVM_VM_COMPILER_PARSER_H_
#define MINIVM_VM_COMPILER_PARSER_H_

#include <string>
#include <string_view>
#include <vector>

#include "vm/compiler/ast.h"
#include "vm/compiler/compiler.h"
#include "vm/compiler/lexer.h"
#include "vm/compiler/token.h"

namespace minivm::compiler {

// Blocks count from the function body (1); expressions count parentheses,
// brackets, argument lists and prefix operators, not the outermost
// expression of a statement, so `((...256 times...))` is still accepted.
inline constexpr int kMaxNesting = 256;

struct ParseResult {
  Module module;
  // A lexical or syntax error was reported.
  bool had_errors = false;
  // Parsing stopped early (nesting too deep); the module is incomplete.
  bool abandoned = false;
};

// Parses a whole source file; diagnostics (lexical and syntax) are appended
// to `diagnostics`.
ParseResult Parse(std::string_view source, std::vector<Diagnostic>* diagnostics);

class Parser {
 public:
  Parser(std::string_view source, std::vector<Diagnostic>* diagnostics);
  ParseResult Run();

 private:
  // Counts one level of nesting for its lifetime; see kMaxNesting.
  class NestingGuard {
   public:
    NestingGuard(Parser* parser, int* depth, int limit);
    ~NestingGuard() { --*depth_; }
    bool ok() const { return ok_; }

   private:
    int* depth_;
    bool ok_;
  };

  // Token stream.
  void Advance();
  bool Check(TokenKind kind) const { return current_.kind == kind; }
  bool Match(TokenKind kind);
  bool Expect(TokenKind kind, std::string_view message);
  bool AtEnd() const { return current_.kind == TokenKind::kEof; }
  Pos CurrentPos() const { return Pos{current_.line, current_.column}; }
  Pos PreviousPos() const { return Pos{previous_.line, previous_.column}; }

  // Diagnostics.
  void ErrorAtCurrent(std::string_view message);
  void ErrorAt(const Token& token, std::string_view message);
  void MissingName(std::string_view message);
  void MissingBrace(std::string_view message);
  void TooDeep();
  void SyncTopLevel();
  void SyncStatement();

  // Declarations.
  void ParseDeclaration();
  // `keyword name`, the start of every declaration: fills the declaration's
  // pos (the keyword's) and name; false, with the error reported, if the
  // name is missing.
  template <typename Decl>
  bool ParseDeclHead(Decl* decl, std::string_view missing_name_message) {
    decl->pos = CurrentPos();
    Advance();  // the keyword
    if (!Check(TokenKind::kIdentifier)) {
      MissingName(missing_name_message);
      return false;
    }
    decl->name = Name{std::string(current_.text), CurrentPos()};
    Advance();
    return true;
  }
  void ParseClass();
  void SkipClassBody();
  void ParseFunction();
  void ParseGlobal();

  // Statements.
  Block* ParseBlock(std::string_view open_message, bool is_if_body = false);
  void SkipNestedDeclaration();
  Stmt* ParseStatement();
  Stmt* ParseVar(bool require_semicolon);
  Stmt* ParseIf();
  Stmt* ParseWhile();
  bool ExpectConditionEnd();
  Stmt* ParseFor();
  Stmt* ParseReturn();
  Stmt* ParseSimple();  // assignment or expression, no ';'

  // Expressions, loosest first.
  Expr* ParseExpression();
  Expr* ParseOr();
  Expr* ParseAnd();
  Expr* ParseBitOr();
  Expr* ParseBitXor();
  Expr* ParseBitAnd();
  Expr* ParseEquality();
  Expr* ParseComparison();
  Expr* ParseShift();
  Expr* ParseTerm();
  Expr* ParseFactor();
  Expr* ParseUnary();
  Expr* ParsePostfix();
  Expr* ParsePrimary();
  bool ParseArguments(Expr* call);  // after '('
  Expr* MakeBinary(TokenKind op, Pos pos, Expr* left, Expr* right);

  Lexer lexer_;
  std::vector<Diagnostic>* diagnostics_;
  Token current_;
  Token previous_;
  ParseResult result_;
  bool panic_ = false;
  int block_depth_ = 0;
  int expr_depth_ = 0;
  // Where "expected '}'" was last reported: nested unclosed blocks all end at
  // the same token, and one message is enough.
  Pos last_missing_brace_{-1, -1};
};

}  // namespace minivm::compiler

#endif  // MINIVM_VM_COMPILER_PARSER_H_
