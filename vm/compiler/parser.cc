#include "vm/compiler/parser.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace minivm::compiler {
namespace {

bool IsStatementKeyword(TokenKind kind) {
  switch (kind) {
    case TokenKind::kVar:
    case TokenKind::kIf:
    case TokenKind::kWhile:
    case TokenKind::kFor:
    case TokenKind::kReturn:
    case TokenKind::kBreak:
    case TokenKind::kContinue:
      return true;
    default:
      return false;
  }
}

bool IsDeclarationKeyword(TokenKind kind) {
  return kind == TokenKind::kClass || kind == TokenKind::kFn;
}

bool IsKeyword(TokenKind kind) {
  return static_cast<uint8_t>(kind) >= static_cast<uint8_t>(TokenKind::kClass) &&
         static_cast<uint8_t>(kind) <= static_cast<uint8_t>(TokenKind::kSpawn);
}

}  // namespace

ParseResult Parse(std::string_view source, std::vector<Diagnostic>* diagnostics) {
  return Parser(source, diagnostics).Run();
}

Parser::Parser(std::string_view source, std::vector<Diagnostic>* diagnostics)
    : lexer_(source, diagnostics), diagnostics_(diagnostics) {
  Advance();
}

Parser::NestingGuard::NestingGuard(Parser* parser, int* depth, int limit) : depth_(depth) {
  ok_ = ++*depth_ <= limit;
  if (!ok_) parser->TooDeep();
}

ParseResult Parser::Run() {
  while (!AtEnd() && !result_.abandoned) {
    ParseDeclaration();
    if (panic_ && !result_.abandoned) {
      SyncTopLevel();
      panic_ = false;
    }
  }
  return std::move(result_);
}

// ---------------------------------------------------------------------------
// Token stream and diagnostics

void Parser::Advance() {
  previous_ = std::move(current_);
  current_ = lexer_.Next();
  // The lexer reported kError tokens already; they only put us in panic mode.
  if (current_.kind == TokenKind::kError) result_.had_errors = true;
}

bool Parser::Match(TokenKind kind) {
  if (!Check(kind)) return false;
  Advance();
  return true;
}

bool Parser::Expect(TokenKind kind, std::string_view message) {
  if (Match(kind)) return true;
  ErrorAtCurrent(message);
  return false;
}

void Parser::ErrorAtCurrent(std::string_view message) { ErrorAt(current_, message); }

void Parser::ErrorAt(const Token& token, std::string_view message) {
  result_.had_errors = true;
  if (panic_ || result_.abandoned) return;
  panic_ = true;
  if (token.kind == TokenKind::kError) return;  // the lexer said it already
  if (token.kind == TokenKind::kEof && lexer_.string_ran_to_end()) return;
  diagnostics_->push_back(Diagnostic{token.line, token.column, std::string(message)});
}

void Parser::MissingName(std::string_view message) {
  if (!IsKeyword(current_.kind)) return ErrorAtCurrent(message);
  ErrorAtCurrent(
      absl::StrCat(std::string(message), " ('", std::string(current_.text), "' is a keyword)"));
  // Skip the keyword, so that recovery does not restart at it and report
  // `var while = 1;` a second time as a broken while loop. Declaration
  // keywords stay: they are where recovery should restart.
  if (!IsDeclarationKeyword(current_.kind) && current_.kind != TokenKind::kVar) Advance();
}

void Parser::MissingBrace(std::string_view message) {
  const Pos pos = CurrentPos();
  if (pos.line == last_missing_brace_.line && pos.column == last_missing_brace_.column) {
    panic_ = true;
    return;
  }
  last_missing_brace_ = pos;
  ErrorAtCurrent(message);
}

void Parser::TooDeep() {
  if (result_.abandoned) return;
  result_.had_errors = true;
  diagnostics_->push_back(Diagnostic{current_.line, current_.column, "nesting too deep"});
  result_.abandoned = true;
  panic_ = true;
}

void Parser::SyncTopLevel() {
  int depth = 0;
  while (!AtEnd()) {
    const TokenKind kind = current_.kind;
    if (depth == 0 && (IsDeclarationKeyword(kind) || kind == TokenKind::kVar)) return;
    Advance();
    if (kind == TokenKind::kSemicolon && depth == 0) return;
    if (kind == TokenKind::kLBrace) ++depth;
    if (kind == TokenKind::kRBrace && depth > 0 && --depth == 0) return;
  }
}

void Parser::SyncStatement() {
  int depth = 0;
  while (!AtEnd()) {
    const TokenKind kind = current_.kind;
    if (depth == 0) {
      if (kind == TokenKind::kRBrace || IsStatementKeyword(kind) || IsDeclarationKeyword(kind)) {
        return;
      }
    }
    Advance();
    if (kind == TokenKind::kSemicolon && depth == 0) return;
    if (kind == TokenKind::kLBrace) ++depth;
    if (kind == TokenKind::kRBrace && --depth == 0 && !Check(TokenKind::kElse)) return;
  }
}

// ---------------------------------------------------------------------------
// Declarations

void Parser::ParseDeclaration() {
  switch (current_.kind) {
    case TokenKind::kClass:
      ParseClass();
      return;
    case TokenKind::kFn:
      ParseFunction();
      return;
    case TokenKind::kVar:
      ParseGlobal();
      return;
    default:
      ErrorAtCurrent("expected 'class', 'fn' or 'var' at top level");
      Advance();  // guarantees progress: SyncTopLevel may stop right here
      return;
  }
}

void Parser::ParseClass() {
  Module& m = result_.module;
  ClassDecl decl;
  if (!ParseDeclHead(&decl, "expected class name after 'class'")) return;
  // Recorded even if the body is malformed, so `new C()` resolves.
  auto record = [&] {
    m.decls.push_back(Decl{DeclKind::kClass, m.classes.size()});
    m.classes.push_back(std::move(decl));
  };
  if (!Expect(TokenKind::kLBrace, "expected '{' after class name")) return record();
  while (!Check(TokenKind::kRBrace)) {
    if (!Check(TokenKind::kIdentifier)) {
      if (Check(TokenKind::kFn)) {
        ErrorAtCurrent("expected field name (classes have no methods)");
      } else {
        MissingName("expected field name");
      }
      SkipClassBody();
      return record();
    }
    decl.fields.push_back(Name{std::string(current_.text), CurrentPos()});
    Advance();
    if (!Match(TokenKind::kComma)) break;
  }
  if (!Expect(TokenKind::kRBrace, "expected ',' or '}' after field name")) SkipClassBody();
  record();
}

// After an error inside `class C { ... }`: skips to the class's closing '}'
// (braces balanced, so a would-be method body is skipped whole). A `class`,
// or an `fn` or `var` at the start of a line, is taken as the next
// declaration instead: the class was probably just missing its '}'.
void Parser::SkipClassBody() {
  int depth = 0;
  while (!AtEnd()) {
    const TokenKind kind = current_.kind;
    if (depth == 0 &&
        (kind == TokenKind::kClass ||
         ((kind == TokenKind::kFn || kind == TokenKind::kVar) && current_.column == 1))) {
      return;
    }
    Advance();
    if (kind == TokenKind::kLBrace) ++depth;
    if (kind == TokenKind::kRBrace && depth-- == 0) {
      panic_ = false;
      return;
    }
  }
}

void Parser::ParseFunction() {
  Module& m = result_.module;
  FnDecl decl;
  if (!ParseDeclHead(&decl, "expected function name after 'fn'")) return;
  const size_t index = m.functions.size();
  m.decls.push_back(Decl{DeclKind::kFn, index});
  m.functions.push_back(std::move(decl));
  // m.functions is a deque: this reference stays valid while we append.
  FnDecl& fn = m.functions[index];
  if (!Expect(TokenKind::kLParen, "expected '(' after function name")) {
    fn.malformed = true;
    return;
  }
  if (!Check(TokenKind::kRParen)) {
    do {
      if (!Check(TokenKind::kIdentifier)) {
        MissingName("expected parameter name");
        fn.malformed = true;
        return;
      }
      fn.params.push_back(Name{std::string(current_.text), CurrentPos()});
      Advance();
    } while (Match(TokenKind::kComma));
  }
  if (!Expect(TokenKind::kRParen, "expected ')' after parameters")) {
    fn.malformed = true;
    return;
  }
  fn.body = ParseBlock("expected '{' before function body");
}

void Parser::ParseGlobal() {
  Module& m = result_.module;
  GlobalDecl decl;
  if (!ParseDeclHead(&decl, "expected variable name after 'var'")) return;
  if (Match(TokenKind::kAssign)) decl.init = ParseExpression();
  m.decls.push_back(Decl{DeclKind::kGlobal, m.globals.size()});
  m.globals.push_back(std::move(decl));
  if (panic_) return;
  Expect(TokenKind::kSemicolon, "expected ';' after variable declaration");
}

// ---------------------------------------------------------------------------
// Statements

Block* Parser::ParseBlock(std::string_view open_message, bool is_if_body) {
  if (!Check(TokenKind::kLBrace)) {
    ErrorAtCurrent(open_message);
    return nullptr;
  }
  NestingGuard guard(this, &block_depth_, kMaxNesting);
  if (!guard.ok()) return nullptr;
  Block* block = result_.module.NewBlock(CurrentPos());
  Advance();  // {
  while (!Check(TokenKind::kRBrace) && !AtEnd() && !result_.abandoned) {
    // A declaration at the start of a line almost surely means a missing '}'
    // (an indented one is reported as a nested declaration).
    if (IsDeclarationKeyword(current_.kind) && current_.column == 1) break;
    if (is_if_body && Check(TokenKind::kElse)) {
      // `if (c) { ... else { ... }`: the '}' before the else is missing.
      // Ending the block here lets the if statement take its else.
      ErrorAtCurrent("expected '}' before 'else'");
      panic_ = false;
      return block;
    }
    if (Stmt* s = ParseStatement()) block->stmts.push_back(s);
    if (panic_ && !result_.abandoned) {
      SyncStatement();
      panic_ = false;
    }
  }
  if (result_.abandoned) return nullptr;
  block->end_pos = CurrentPos();
  if (!Match(TokenKind::kRBrace)) MissingBrace("expected '}' at end of block");
  return block;
}

Stmt* Parser::ParseStatement() {
  switch (current_.kind) {
    case TokenKind::kVar:
      return ParseVar(/*require_semicolon=*/true);
    case TokenKind::kIf:
      return ParseIf();
    case TokenKind::kWhile:
      return ParseWhile();
    case TokenKind::kFor:
      return ParseFor();
    case TokenKind::kReturn:
      return ParseReturn();
    case TokenKind::kBreak:
    case TokenKind::kContinue: {
      const bool is_break = Check(TokenKind::kBreak);
      Stmt* s =
          result_.module.NewStmt(is_break ? StmtKind::kBreak : StmtKind::kContinue, CurrentPos());
      Advance();
      if (!Expect(TokenKind::kSemicolon,
                  is_break ? "expected ';' after 'break'" : "expected ';' after 'continue'")) {
        return nullptr;
      }
      return s;
    }
    case TokenKind::kElse:
      ErrorAtCurrent("'else' without a matching 'if'");
      return nullptr;
    case TokenKind::kFn:
    case TokenKind::kClass:
      SkipNestedDeclaration();
      return nullptr;
    case TokenKind::kLBrace: {
      Stmt* s = result_.module.NewStmt(StmtKind::kBlock, CurrentPos());
      s->body = ParseBlock("expected '{'");
      return s->body != nullptr ? s : nullptr;
    }
    default: {
      Stmt* s = ParseSimple();
      if (s == nullptr) return nullptr;
      if (!Expect(TokenKind::kSemicolon, s->kind == StmtKind::kAssign
                                             ? "expected ';' after assignment"
                                             : "expected ';' after expression")) {
        return nullptr;
      }
      return s;
    }
  }
}

// `fn` or `class` inside a block: reported once, and skipped whole (up to
// its balanced closing '}') so that its body adds no errors of its own.
void Parser::SkipNestedDeclaration() {
  ErrorAtCurrent(Check(TokenKind::kFn) ? "functions can only be declared at the top level"
                                       : "classes can only be declared at the top level");
  Advance();
  int depth = 0;
  while (!AtEnd()) {
    const TokenKind kind = current_.kind;
    if (depth == 0 && (kind == TokenKind::kSemicolon || kind == TokenKind::kRBrace)) break;
    Advance();
    if (kind == TokenKind::kLBrace) ++depth;
    if (kind == TokenKind::kRBrace && --depth == 0) {
      panic_ = false;
      return;
    }
  }
}

Stmt* Parser::ParseVar(bool require_semicolon) {
  Stmt* s = result_.module.NewStmt(StmtKind::kVar, CurrentPos());
  Advance();  // var
  if (!Check(TokenKind::kIdentifier)) {
    MissingName("expected variable name after 'var'");
    return nullptr;
  }
  s->name = std::string(current_.text);
  s->name_pos = CurrentPos();
  Advance();
  if (Match(TokenKind::kAssign)) {
    s->expr = ParseExpression();
    // A broken initialiser still declares the name (see parser.h).
    if (s->expr == nullptr) return s;
  }
  if (require_semicolon) Expect(TokenKind::kSemicolon, "expected ';' after variable declaration");
  return s;
}

Stmt* Parser::ParseIf() {
  Stmt* s = result_.module.NewStmt(StmtKind::kIf, CurrentPos());
  Advance();  // if
  while (true) {
    IfClause clause;
    if (!Expect(TokenKind::kLParen, "expected '(' after 'if'")) return nullptr;
    clause.cond = ParseExpression();
    if (clause.cond == nullptr) return nullptr;
    if (!ExpectConditionEnd()) return nullptr;
    clause.body = ParseBlock("expected '{' after condition", /*is_if_body=*/true);
    if (clause.body == nullptr) return nullptr;
    s->clauses.push_back(clause);
    if (!Match(TokenKind::kElse)) return s;
    if (!Match(TokenKind::kIf)) break;
  }
  s->else_body = ParseBlock("expected '{' or 'if' after 'else'");
  return s->else_body != nullptr ? s : nullptr;
}

bool Parser::ExpectConditionEnd() {
  // `if (x = 1)`: assignment is a statement here, so say what was meant.
  return Expect(TokenKind::kRParen, Check(TokenKind::kAssign)
                                        ? "expected ')' after condition (use '==' to compare)"
                                        : "expected ')' after condition");
}

Stmt* Parser::ParseWhile() {
  Stmt* s = result_.module.NewStmt(StmtKind::kWhile, CurrentPos());
  Advance();  // while
  if (!Expect(TokenKind::kLParen, "expected '(' after 'while'")) return nullptr;
  s->expr = ParseExpression();
  if (s->expr == nullptr) return nullptr;
  if (!ExpectConditionEnd()) return nullptr;
  s->body = ParseBlock("expected '{' after condition");
  return s->body != nullptr ? s : nullptr;
}

Stmt* Parser::ParseFor() {
  Stmt* s = result_.module.NewStmt(StmtKind::kFor, CurrentPos());
  Advance();  // for
  if (!Expect(TokenKind::kLParen, "expected '(' after 'for'")) return nullptr;
  if (!Check(TokenKind::kSemicolon)) {
    s->init = Check(TokenKind::kVar) ? ParseVar(/*require_semicolon=*/false) : ParseSimple();
    if (s->init == nullptr || panic_) return nullptr;
  }
  if (!Expect(TokenKind::kSemicolon, "expected ';' after loop initializer")) return nullptr;
  if (!Check(TokenKind::kSemicolon)) {
    s->expr = ParseExpression();
    if (s->expr == nullptr) return nullptr;
  }
  if (!Expect(TokenKind::kSemicolon, "expected ';' after loop condition")) return nullptr;
  if (!Check(TokenKind::kRParen)) {
    s->step = ParseSimple();
    if (s->step == nullptr) return nullptr;
  }
  if (!Expect(TokenKind::kRParen, "expected ')' after for clauses")) return nullptr;
  s->body = ParseBlock("expected '{' after for clauses");
  return s->body != nullptr ? s : nullptr;
}

Stmt* Parser::ParseReturn() {
  Stmt* s = result_.module.NewStmt(StmtKind::kReturn, CurrentPos());
  Advance();  // return
  if (!Check(TokenKind::kSemicolon)) {
    s->expr = ParseExpression();
    if (s->expr == nullptr) return nullptr;
  }
  if (!Expect(TokenKind::kSemicolon, "expected ';' after return value")) return nullptr;
  return s;
}

Stmt* Parser::ParseSimple() {
  const Pos start = CurrentPos();
  Expr* e = ParseExpression();
  if (e == nullptr) return nullptr;
  if (!Check(TokenKind::kAssign)) {
    Stmt* s = result_.module.NewStmt(StmtKind::kExpr, start);
    s->expr = e;
    return s;
  }
  if (e->kind != ExprKind::kName && e->kind != ExprKind::kField && e->kind != ExprKind::kIndex) {
    ErrorAtCurrent("invalid assignment target");
    return nullptr;
  }
  Stmt* s = result_.module.NewStmt(StmtKind::kAssign, CurrentPos());
  Advance();  // =
  s->target = e;
  s->expr = ParseExpression();
  if (s->expr == nullptr) return nullptr;
  return s;
}

// ---------------------------------------------------------------------------
// Expressions

Expr* Parser::MakeBinary(TokenKind op, Pos pos, Expr* left, Expr* right) {
  Expr* e = result_.module.NewExpr(ExprKind::kBinary, pos);
  e->op = op;
  e->left = left;
  e->right = right;
  return e;
}

Expr* Parser::ParseExpression() {
  NestingGuard guard(this, &expr_depth_, kMaxNesting + 1);
  if (!guard.ok()) return nullptr;
  return ParseOr();
}

// Each binary level is a loop, so left-associative chains build left-nested
// trees without recursion.
#define MINIVM_BINARY_LEVEL(Name, Next, ...)                          \
  Expr* Parser::Name() {                                              \
    Expr* left = Next();                                              \
    if (left == nullptr) return nullptr;                              \
    for (;;) {                                                        \
      const TokenKind op = current_.kind;                             \
      bool matches = false;                                           \
      for (TokenKind k : {__VA_ARGS__}) matches = matches || op == k; \
      if (!matches) return left;                                      \
      const Pos pos = CurrentPos();                                   \
      Advance();                                                      \
      Expr* right = Next();                                           \
      if (right == nullptr) return nullptr;                           \
      left = MakeBinary(op, pos, left, right);                        \
    }                                                                 \
  }

MINIVM_BINARY_LEVEL(ParseOr, ParseAnd, TokenKind::kOrOr)
// The bitwise levels sit where C and Java put them (docs/language.md,
// "Bitwise operators"): `|` `^` `&` between `&&` and `==`, shifts between
// the comparisons and `+`.
MINIVM_BINARY_LEVEL(ParseAnd, ParseBitOr, TokenKind::kAndAnd)
MINIVM_BINARY_LEVEL(ParseBitOr, ParseBitXor, TokenKind::kPipe)
MINIVM_BINARY_LEVEL(ParseBitXor, ParseBitAnd, TokenKind::kCaret)
MINIVM_BINARY_LEVEL(ParseBitAnd, ParseEquality, TokenKind::kAmp)
MINIVM_BINARY_LEVEL(ParseEquality, ParseComparison, TokenKind::kEq, TokenKind::kNe)
MINIVM_BINARY_LEVEL(ParseComparison, ParseShift, TokenKind::kLt, TokenKind::kLe, TokenKind::kGt,
                    TokenKind::kGe)
MINIVM_BINARY_LEVEL(ParseShift, ParseTerm, TokenKind::kShl, TokenKind::kShr)
MINIVM_BINARY_LEVEL(ParseTerm, ParseFactor, TokenKind::kPlus, TokenKind::kMinus)
MINIVM_BINARY_LEVEL(ParseFactor, ParseUnary, TokenKind::kStar, TokenKind::kSlash,
                    TokenKind::kPercent)
#undef MINIVM_BINARY_LEVEL

Expr* Parser::ParseUnary() {
  if (!Check(TokenKind::kMinus) && !Check(TokenKind::kBang) && !Check(TokenKind::kTilde)) {
    return ParsePostfix();
  }
  NestingGuard guard(this, &expr_depth_, kMaxNesting + 1);
  if (!guard.ok()) return nullptr;
  Expr* e = result_.module.NewExpr(ExprKind::kUnary, CurrentPos());
  e->op = current_.kind;
  Advance();
  e->left = ParseUnary();
  return e->left != nullptr ? e : nullptr;
}

Expr* Parser::ParsePostfix() {
  Expr* e = ParsePrimary();
  if (e == nullptr) return nullptr;
  for (;;) {
    if (Check(TokenKind::kDot)) {
      Advance();
      if (!Check(TokenKind::kIdentifier)) {
        ErrorAtCurrent("expected field name after '.'");
        return nullptr;
      }
      Expr* field = result_.module.NewExpr(ExprKind::kField, CurrentPos());
      field->text = std::string(current_.text);
      field->left = e;
      Advance();
      e = field;
    } else if (Check(TokenKind::kLBracket)) {
      Expr* index = result_.module.NewExpr(ExprKind::kIndex, CurrentPos());
      Advance();
      index->left = e;
      index->right = ParseExpression();
      if (index->right == nullptr) return nullptr;
      if (!Expect(TokenKind::kRBracket, "expected ']' after index")) return nullptr;
      e = index;
    } else if (Check(TokenKind::kLParen)) {
      // Functions are not values: only a name can be called (ParsePrimary).
      ErrorAtCurrent("only a function name can be called");
      return nullptr;
    } else {
      return e;
    }
  }
}

bool Parser::ParseArguments(Expr* call) {
  if (!Expect(TokenKind::kLParen, call->kind == ExprKind::kNew
                                      ? "expected '(' after class name"
                                      : "expected '(' after function name")) {
    return false;
  }
  if (!Check(TokenKind::kRParen)) {
    do {
      Expr* arg = ParseExpression();
      if (arg == nullptr) return false;
      call->args.push_back(arg);
    } while (Match(TokenKind::kComma));
  }
  return Expect(TokenKind::kRParen, "expected ')' after arguments");
}

Expr* Parser::ParsePrimary() {
  Module& m = result_.module;
  const Pos pos = CurrentPos();
  switch (current_.kind) {
    case TokenKind::kInt: {
      Expr* e = m.NewExpr(ExprKind::kInt, pos);
      e->int_value = current_.int_value;
      Advance();
      return e;
    }
    case TokenKind::kTrue:
    case TokenKind::kFalse: {
      Expr* e = m.NewExpr(ExprKind::kInt, pos);
      e->int_value = Check(TokenKind::kTrue) ? 1 : 0;
      Advance();
      return e;
    }
    case TokenKind::kNull:
      Advance();
      return m.NewExpr(ExprKind::kNull, pos);
    case TokenKind::kString: {
      Expr* e = m.NewExpr(ExprKind::kString, pos);
      e->text = std::move(current_.string_value);
      Advance();
      return e;
    }
    case TokenKind::kIdentifier: {
      std::string name(current_.text);
      Advance();
      if (!Check(TokenKind::kLParen)) {
        Expr* e = m.NewExpr(ExprKind::kName, pos);
        e->text = std::move(name);
        return e;
      }
      Expr* call = m.NewExpr(ExprKind::kCall, pos);
      call->text = std::move(name);
      call->name_pos = pos;
      return ParseArguments(call) ? call : nullptr;
    }
    case TokenKind::kNew:
    case TokenKind::kSpawn: {
      const bool is_new = Check(TokenKind::kNew);
      Advance();
      if (!Check(TokenKind::kIdentifier)) {
        ErrorAtCurrent(is_new ? "expected class name after 'new'"
                              : "expected function name after 'spawn'");
        return nullptr;
      }
      Expr* e = m.NewExpr(is_new ? ExprKind::kNew : ExprKind::kSpawn, pos);
      e->text = std::string(current_.text);
      e->name_pos = CurrentPos();
      Advance();
      return ParseArguments(e) ? e : nullptr;
    }
    case TokenKind::kLParen: {
      Advance();
      Expr* e = ParseExpression();
      if (e == nullptr) return nullptr;
      if (!Expect(TokenKind::kRParen, "expected ')' after expression")) return nullptr;
      return e;
    }
    default:
      ErrorAtCurrent("expected expression");
      return nullptr;
  }
}

}  // namespace minivm::compiler
