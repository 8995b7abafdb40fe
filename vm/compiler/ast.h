// The syntax tree the parser builds and the bytecode generator walks.
//
// Nodes live in an arena owned by the Module and point at each other with
// raw pointers. This matters for robustness, not just speed: a left-nested
// chain such as `a+b+c+...` or `a.b.c...` can be a million nodes deep, and
// recursive unique_ptr destructors would overflow the native stack on it.
// With the arena, destruction is a flat loop.
#ifndef MINIVM_VM_COMPILER_AST_H_
#define MINIVM_VM_COMPILER_AST_H_

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "vm/compiler/token.h"

namespace minivm::compiler {

// A source position, 1-based.
struct Pos {
  int line = 0;
  int column = 0;
};

enum class ExprKind : uint8_t {
  kInt,     // int_value
  kString,  // text: the literal's bytes, escapes resolved
  kNull,
  kName,    // text: a variable
  kUnary,   // op (kMinus, kBang, kTilde), left
  kBinary,  // op, left, right; && and || included
  kCall,    // text: function or built-in, args
  kNew,     // text: class, args
  kSpawn,   // text: function, args
  kField,   // left.text
  kIndex,   // left[right]
};

struct Expr {
  ExprKind kind;
  // Of the token that best names the construct: the operator, the called
  // name, the field name, the '['. Used for diagnostics and the line table.
  Pos pos;
  TokenKind op = TokenKind::kEof;
  int64_t int_value = 0;
  std::string text;
  Pos name_pos;  // kCall/kNew/kSpawn: of the name
  Expr* left = nullptr;
  Expr* right = nullptr;
  std::vector<Expr*> args;
};

struct Block;

enum class StmtKind : uint8_t {
  kVar,     // name, expr (may be null: `var x;`)
  kAssign,  // target (kName, kField or kIndex), expr
  kExpr,    // expr
  kIf,      // clauses, else_body (may be null)
  kWhile,   // expr (the condition), body
  kFor,     // init, expr (condition, may be null), step, body
  kReturn,  // expr (may be null)
  kBreak,
  kContinue,
  kBlock,  // body
};

struct Stmt;

struct IfClause {
  Expr* cond = nullptr;
  Block* body = nullptr;
};

struct Stmt {
  StmtKind kind;
  Pos pos;  // of the first token (for kAssign: of the '=')
  std::string name;
  Pos name_pos;
  Expr* target = nullptr;
  Expr* expr = nullptr;
  // `if (a) {..} else if (b) {..}` is one statement with two clauses, so that
  // long else-if chains need no recursion.
  std::vector<IfClause> clauses;
  Block* else_body = nullptr;
  Stmt* init = nullptr;  // kFor
  Stmt* step = nullptr;  // kFor
  Block* body = nullptr;
};

struct Block {
  Pos pos;      // of '{'
  Pos end_pos;  // of '}'
  std::vector<Stmt*> stmts;
};

struct Name {
  std::string text;
  Pos pos;
};

struct ClassDecl {
  Name name;
  Pos pos;  // of `class`
  std::vector<Name> fields;
};

struct FnDecl {
  Name name;
  Pos pos;  // of `fn`
  std::vector<Name> params;
  Block* body = nullptr;  // null if the declaration did not parse
  // The header did not parse completely: the parameter list may be wrong, so
  // arity errors at call sites would be noise.
  bool malformed = false;
};

struct GlobalDecl {
  Name name;
  Pos pos;               // of `var`
  Expr* init = nullptr;  // null: `var x;` (or a broken initialiser)
};

enum class DeclKind : uint8_t { kClass, kFn, kGlobal };

struct Decl {
  DeclKind kind;
  size_t index;  // into the Module vector of that kind
};

struct Module {
  std::vector<Decl> decls;  // source order
  std::deque<ClassDecl> classes;
  std::deque<FnDecl> functions;
  std::deque<GlobalDecl> globals;

  // The arena. std::deque never moves its elements, so pointers stay valid.
  std::deque<Expr> exprs;
  std::deque<Stmt> stmts;
  std::deque<Block> blocks;

  Expr* NewExpr(ExprKind kind, Pos pos) {
    Expr& e = exprs.emplace_back();
    e.kind = kind;
    e.pos = pos;
    return &e;
  }
  Stmt* NewStmt(StmtKind kind, Pos pos) {
    Stmt& s = stmts.emplace_back();
    s.kind = kind;
    s.pos = pos;
    return &s;
  }
  Block* NewBlock(Pos pos) {
    Block& b = blocks.emplace_back();
    b.pos = pos;
    return &b;
  }
};

}  // namespace minivm::compiler

#endif  // MINIVM_VM_COMPILER_AST_H_
