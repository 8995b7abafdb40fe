#include "vm/compiler/bytecode_generator.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "vm/bytecode/builtins.h"
#include "vm/compiler/emitter.h"

namespace minivm::compiler {

void CompileContext::Error(Pos pos, std::string message) {
  diagnostics->push_back(Diagnostic{pos.line, pos.column, std::move(message)});
}

uint32_t CompileContext::InternString(const std::string& s) {
  auto [it, inserted] =
      strings.try_emplace(s, static_cast<uint32_t>(program->string_constants.size()));
  if (inserted) program->string_constants.push_back(s);
  return it->second;
}

namespace {

std::string Plural(int n, std::string_view noun) {
  return absl::StrCat(n, " ", std::string(noun), n == 1 ? "" : "s");
}

bool IsLogical(TokenKind op) { return op == TokenKind::kAndAnd || op == TokenKind::kOrOr; }

// The left operand is evaluated first and is the one a chain nests through
// (a+b+c is (a+b)+c, a.b.c is (a.b).c): such nodes are compiled by walking
// their left spine iteratively, since it may be arbitrarily long.
bool IsSpineNode(const Expr* e) {
  return (e->kind == ExprKind::kBinary && !IsLogical(e->op)) || e->kind == ExprKind::kField ||
         e->kind == ExprKind::kIndex;
}

// The binary operators that compile to one instruction (&& and || are
// jumps, IsLogical).
constexpr std::pair<TokenKind, Opcode> kBinaryOpcodes[] = {
    {TokenKind::kPlus, Opcode::ADD}, {TokenKind::kMinus, Opcode::SUB},
    {TokenKind::kStar, Opcode::MUL}, {TokenKind::kSlash, Opcode::DIV},
    {TokenKind::kPercent, Opcode::MOD}, {TokenKind::kEq, Opcode::EQ}, {TokenKind::kNe, Opcode::NE},
    {TokenKind::kLt, Opcode::LT}, {TokenKind::kLe, Opcode::LE}, {TokenKind::kGt, Opcode::GT},
    {TokenKind::kGe, Opcode::GE}, {TokenKind::kAmp, Opcode::BIT_AND},
    {TokenKind::kPipe, Opcode::BIT_OR}, {TokenKind::kCaret, Opcode::BIT_XOR},
    {TokenKind::kShl, Opcode::SHL}, {TokenKind::kShr, Opcode::SHR}};

// `op` is one of kBinaryOpcodes' tokens: the parser makes binary nodes of
// no others.
Opcode BinaryOpcode(TokenKind op) {
  for (const auto& [token, opcode] : kBinaryOpcodes) {
    if (token == op) return opcode;
  }
  return Opcode::GE;
}

// Walks one function's AST and emits its bytecode through an Emitter.
class BytecodeGenerator {
 public:
  BytecodeGenerator(CompileContext* ctx, Function* fn) : ctx_(ctx), fn_(fn), em_(fn) {}

  void CompileFunction(const FnDecl& decl);
  void CompileGlobals(const Module& module);

 private:
  struct Local {
    int slot;
    int scope;
  };
  struct Loop {
    // while, and for without a step: continue jumps back to the condition.
    bool continue_backward = false;
    size_t continue_target = 0;
    std::vector<size_t> continue_jumps;  // forward, to the step
    std::vector<size_t> break_jumps;
  };

  void Error(Pos pos, std::string message) { ctx_->Error(pos, std::move(message)); }
  // An unknown name is reported once per function (like GCC), not at every
  // use: `for (i = 0; i < n; i = i + 1)` without a `var` is one mistake.
  void UnknownName(Pos pos, std::string message) {
    const bool unknown = absl::StartsWith(message, "unknown ");
    if (!unknown || reported_unknown_.insert(message).second) Error(pos, std::move(message));
  }
  void Finish(Pos end, bool falls_through);

  // Scopes and locals.
  void BeginScope() { scopes_.emplace_back(); }
  void EndScope();
  int DeclareLocal(const std::string& name, Pos pos);  // returns the slot
  std::optional<int> LookupLocal(const std::string& name) const;
  // Why `name` is not a variable, for a bare use of a function/class name.
  std::string NotAValue(const std::string& name) const;

  // Statements: return true if control never reaches the next statement.
  bool CompileBlock(const Block* block);  // new scope
  bool CompileStatements(const std::vector<Stmt*>& stmts);
  bool CompileStmt(const Stmt* s);
  void CompileAssign(const Stmt* s);
  bool CompileIf(const Stmt* s);
  void CompileWhile(const Stmt* s);
  void CompileFor(const Stmt* s);
  void CompileSimple(const Stmt* s);  // expression or assignment statement

  // Expressions: each leaves exactly one value on the stack.
  void CompileExpr(const Expr* e);
  void CompileLeaf(const Expr* e);
  void CompileLogical(const Expr* e);
  void CompileName(const Expr* e);
  void CompileCall(const Expr* e);
  void CompileNew(const Expr* e);
  void CompileSpawn(const Expr* e);
  // CALL or SPAWN of user function #index: the arity check, the arguments,
  // the instruction.
  void CompileUserFunctionCall(Opcode op, const Expr* e, uint32_t index, int depth);
  bool CheckArgCount(const Expr* e);
  void CompileArgs(const Expr* e);
  // After a call that failed to resolve: keep the stack shape of a call.
  void EmitFailedCall(const Expr* e, int depth_before);
  void EmitField(Opcode op, const Expr* e);

  CompileContext* ctx_;
  Function* fn_;
  Emitter em_;
  uint32_t num_field_caches_ = 0;

  absl::flat_hash_map<std::string, std::vector<Local>> locals_;
  std::vector<std::vector<const std::string*>> scopes_;  // names declared per scope
  int next_slot_ = 0;
  int max_slots_ = 0;
  bool too_many_locals_ = false;

  std::vector<Loop> loops_;
  absl::flat_hash_set<std::string> reported_unknown_;
};

// ---------------------------------------------------------------------------
// Functions

void BytecodeGenerator::CompileFunction(const FnDecl& decl) {
  em_.set_line(decl.pos.line);
  BeginScope();
  // Parameters share the body's outermost scope: `fn f(a) { var a; }` is a
  // redefinition, as in C.
  for (const Name& p : decl.params) DeclareLocal(p.text, p.pos);
  bool terminates = false;
  Pos end = decl.pos;
  if (decl.body != nullptr) {
    terminates = CompileStatements(decl.body->stmts);
    end = decl.body->end_pos;
  }
  EndScope();
  Finish(end, !terminates);
}

void BytecodeGenerator::CompileGlobals(const Module& module) {
  em_.set_line(1);
  for (const Decl& d : module.decls) {
    if (d.kind != DeclKind::kGlobal) continue;
    const GlobalDecl& g = module.globals[d.index];
    if (g.init == nullptr) continue;  // globals start as null
    auto it = ctx_->globals.find(g.name.text);
    CompileExpr(g.init);
    em_.set_line(g.name.pos.line);
    em_.EmitU32(Opcode::STORE_GLOBAL, it != ctx_->globals.end() ? it->second : 0);
  }
  Finish(Pos{em_.line(), 1}, true);
}

void BytecodeGenerator::Finish(Pos end, bool falls_through) {
  if (falls_through || em_.JumpTargetsEnd() || em_.offset() == 0) {
    em_.set_line(end.line);
    em_.Emit(Opcode::PUSH_NULL);
    em_.Emit(Opcode::RETURN);
  }
  fn_->num_locals = static_cast<uint16_t>(std::min(max_slots_, kMaxLocals));
  if (em_.max_depth() > kMaxStack) {
    Error(Pos{fn_->line, 1},
          absl::StrCat("function '", fn_->name, "' is too complex: its operand stack would exceed ",
                       kMaxStack, " values"));
  }
  fn_->max_stack = static_cast<uint16_t>(std::min(em_.max_depth(), kMaxStack));
  fn_->num_field_caches = num_field_caches_;
  fn_->field_caches = std::make_unique<FieldCache[]>(num_field_caches_);
}

// ---------------------------------------------------------------------------
// Scopes

void BytecodeGenerator::EndScope() {
  for (const std::string* name : scopes_.back()) {
    auto it = locals_.find(*name);
    it->second.pop_back();
    if (it->second.empty()) locals_.erase(it);
    --next_slot_;
  }
  scopes_.pop_back();
}

int BytecodeGenerator::DeclareLocal(const std::string& name, Pos pos) {
  const int scope = static_cast<int>(scopes_.size()) - 1;
  auto [it, inserted] = locals_.try_emplace(name);
  if (!it->second.empty() && it->second.back().scope == scope) {
    Error(pos, absl::StrCat("redefinition of '", name, "'"));
    return it->second.back().slot;  // keep using the first one
  }
  const int slot = next_slot_++;
  max_slots_ = std::max(max_slots_, next_slot_);
  if (next_slot_ > kMaxLocals && !too_many_locals_) {
    too_many_locals_ = true;
    Error(pos, absl::StrCat("too many local variables in function '", fn_->name, "' (max ",
                            kMaxLocals, ")"));
  }
  it->second.push_back(Local{slot, scope});
  // For tools (VMTI GetLocalName): every name a slot holds in the function.
  if (slot < kMaxLocals) {
    if (fn_->local_names.size() <= static_cast<size_t>(slot)) fn_->local_names.resize(slot + 1);
    std::string& names = fn_->local_names[slot];
    if (!absl::c_linear_search(absl::StrSplit(names, '/'), name)) {
      names = names.empty() ? name : absl::StrCat(names, "/", name);
    }
  }
  // `name` is the AST's string, which outlives this compiler.
  scopes_.back().push_back(&name);
  return slot;
}

std::optional<int> BytecodeGenerator::LookupLocal(const std::string& name) const {
  auto it = locals_.find(name);
  if (it == locals_.end() || it->second.empty()) return std::nullopt;
  return it->second.back().slot;
}

std::string BytecodeGenerator::NotAValue(const std::string& name) const {
  if (ctx_->classes.contains(name)) return absl::StrCat("'", name, "' is a class, not a value");
  if (ctx_->functions.contains(name) || LookupBuiltin(name).has_value()) {
    return absl::StrCat("'", name, "' is a function, not a value");
  }
  return absl::StrCat("unknown variable '", name, "'");
}

// ---------------------------------------------------------------------------
// Statements

bool BytecodeGenerator::CompileBlock(const Block* block) {
  BeginScope();
  const bool terminates = CompileStatements(block->stmts);
  EndScope();
  return terminates;
}

bool BytecodeGenerator::CompileStatements(const std::vector<Stmt*>& stmts) {
  // Code after a return/break/continue is still compiled, for its errors,
  // and then it is that dead code which ends the block: what counts is
  // whether the *last* statement can fall through, so that the code never
  // runs off the end of the function even where it is unreachable.
  bool terminates = false;
  for (const Stmt* s : stmts) terminates = CompileStmt(s);
  return terminates;
}

bool BytecodeGenerator::CompileStmt(const Stmt* s) {
  em_.set_line(s->pos.line);
  switch (s->kind) {
    case StmtKind::kVar: {
      // The initialiser is compiled before the name is declared, so
      // `var x = x;` reads an outer x.
      if (s->expr != nullptr) {
        CompileExpr(s->expr);
      } else {
        // Needed even though locals start null: a loop may reuse the slot.
        em_.Emit(Opcode::PUSH_NULL);
      }
      const int slot = DeclareLocal(s->name, s->name_pos);
      em_.set_line(s->name_pos.line);
      em_.EmitU16(Opcode::STORE_LOCAL, static_cast<uint16_t>(std::min(slot, kMaxLocals - 1)));
      return false;
    }
    case StmtKind::kAssign:
    case StmtKind::kExpr:
      CompileSimple(s);
      return false;
    case StmtKind::kIf:
      return CompileIf(s);
    case StmtKind::kWhile:
      CompileWhile(s);
      return false;
    case StmtKind::kFor:
      CompileFor(s);
      return false;
    case StmtKind::kReturn:
      if (s->expr != nullptr) {
        CompileExpr(s->expr);
      } else {
        em_.Emit(Opcode::PUSH_NULL);
      }
      em_.set_line(s->pos.line);
      em_.Emit(Opcode::RETURN);
      return true;
    case StmtKind::kBreak:
      if (loops_.empty()) {
        Error(s->pos, "'break' outside a loop");
        return false;
      }
      loops_.back().break_jumps.push_back(em_.EmitJump(Opcode::JUMP));
      return true;
    case StmtKind::kContinue: {
      if (loops_.empty()) {
        Error(s->pos, "'continue' outside a loop");
        return false;
      }
      Loop& loop = loops_.back();
      if (loop.continue_backward) {
        em_.EmitLoop(loop.continue_target);
      } else {
        loop.continue_jumps.push_back(em_.EmitJump(Opcode::JUMP));
      }
      return true;
    }
    case StmtKind::kBlock:
      return CompileBlock(s->body);
  }
  return false;
}

void BytecodeGenerator::CompileSimple(const Stmt* s) {
  if (s->kind == StmtKind::kExpr) {
    CompileExpr(s->expr);
    em_.set_line(s->pos.line);
    em_.Emit(Opcode::POP);
    return;
  }
  CompileAssign(s);
}

void BytecodeGenerator::CompileAssign(const Stmt* s) {
  const Expr* target = s->target;
  switch (target->kind) {
    case ExprKind::kName: {
      CompileExpr(s->expr);
      em_.set_line(target->pos.line);
      if (std::optional<int> slot = LookupLocal(target->text)) {
        em_.EmitU16(Opcode::STORE_LOCAL, static_cast<uint16_t>(std::min(*slot, kMaxLocals - 1)));
      } else if (auto it = ctx_->globals.find(target->text); it != ctx_->globals.end()) {
        em_.EmitU32(Opcode::STORE_GLOBAL, it->second);
      } else {
        UnknownName(target->pos, NotAValue(target->text));
        em_.Emit(Opcode::POP);
      }
      return;
    }
    case ExprKind::kField:
      CompileExpr(target->left);
      CompileExpr(s->expr);
      EmitField(Opcode::SET_FIELD, target);
      return;
    case ExprKind::kIndex:
      CompileExpr(target->left);
      CompileExpr(target->right);
      CompileExpr(s->expr);
      em_.set_line(target->pos.line);
      em_.Emit(Opcode::SET_INDEX);
      return;
    default:
      return;  // the parser accepts no other target
  }
}

bool BytecodeGenerator::CompileIf(const Stmt* s) {
  std::vector<size_t> end_jumps;
  bool all_terminate = true;
  for (size_t i = 0; i < s->clauses.size(); ++i) {
    const IfClause& clause = s->clauses[i];
    CompileExpr(clause.cond);
    em_.set_line(clause.cond->pos.line);
    const size_t skip = em_.EmitJump(Opcode::JUMP_IF_FALSE);
    const bool terminates = CompileBlock(clause.body);
    all_terminate = all_terminate && terminates;
    const bool more = i + 1 < s->clauses.size() || s->else_body != nullptr;
    if (more && !terminates) end_jumps.push_back(em_.EmitJump(Opcode::JUMP));
    em_.PatchJump(skip);
  }
  if (s->else_body != nullptr) {
    all_terminate = CompileBlock(s->else_body) && all_terminate;
  } else {
    all_terminate = false;
  }
  for (size_t j : end_jumps) em_.PatchJump(j);
  return all_terminate;
}

void BytecodeGenerator::CompileWhile(const Stmt* s) {
  const size_t start = em_.offset();
  CompileExpr(s->expr);
  em_.set_line(s->pos.line);
  const size_t exit = em_.EmitJump(Opcode::JUMP_IF_FALSE);
  Loop loop;
  loop.continue_backward = true;
  loop.continue_target = start;
  loops_.push_back(std::move(loop));
  CompileBlock(s->body);
  em_.set_line(s->pos.line);
  em_.EmitLoop(start);
  em_.PatchJump(exit);
  for (size_t j : loops_.back().break_jumps) em_.PatchJump(j);
  loops_.pop_back();
}

void BytecodeGenerator::CompileFor(const Stmt* s) {
  BeginScope();  // a `var` in the initialiser belongs to the loop
  if (s->init != nullptr) CompileStmt(s->init);
  em_.set_line(s->pos.line);
  const size_t start = em_.offset();
  std::optional<size_t> exit;
  if (s->expr != nullptr) {
    CompileExpr(s->expr);
    em_.set_line(s->pos.line);
    exit = em_.EmitJump(Opcode::JUMP_IF_FALSE);
  }
  Loop loop;
  loop.continue_backward = s->step == nullptr;
  loop.continue_target = start;
  loops_.push_back(std::move(loop));
  CompileBlock(s->body);
  for (size_t j : loops_.back().continue_jumps) em_.PatchJump(j);
  if (s->step != nullptr) {
    em_.set_line(s->step->pos.line);
    CompileSimple(s->step);
  }
  em_.set_line(s->pos.line);
  em_.EmitLoop(start);
  if (exit.has_value()) em_.PatchJump(*exit);
  for (size_t j : loops_.back().break_jumps) em_.PatchJump(j);
  loops_.pop_back();
  EndScope();
}

// ---------------------------------------------------------------------------
// Expressions

void BytecodeGenerator::CompileExpr(const Expr* e) {
  if (!IsSpineNode(e)) return CompileLeaf(e);
  absl::InlinedVector<const Expr*, 8> spine;
  const Expr* leaf = e;
  while (IsSpineNode(leaf)) {
    spine.push_back(leaf);
    leaf = leaf->left;
  }
  CompileLeaf(leaf);
  for (auto it = spine.rbegin(); it != spine.rend(); ++it) {
    const Expr* node = *it;
    switch (node->kind) {
      case ExprKind::kBinary:
        CompileExpr(node->right);
        em_.set_line(node->pos.line);
        em_.Emit(BinaryOpcode(node->op));
        break;
      case ExprKind::kField:
        EmitField(Opcode::GET_FIELD, node);
        break;
      default:  // kIndex
        CompileExpr(node->right);
        em_.set_line(node->pos.line);
        em_.Emit(Opcode::GET_INDEX);
        break;
    }
  }
}

void BytecodeGenerator::CompileLeaf(const Expr* e) {
  em_.set_line(e->pos.line);
  switch (e->kind) {
    case ExprKind::kInt:
      em_.EmitPushInt(e->int_value);
      return;
    case ExprKind::kString:
      em_.EmitU32(Opcode::PUSH_STRING, ctx_->InternString(e->text));
      return;
    case ExprKind::kNull:
      em_.Emit(Opcode::PUSH_NULL);
      return;
    case ExprKind::kName:
      CompileName(e);
      return;
    case ExprKind::kUnary:
      if (e->op == TokenKind::kMinus && e->left->kind == ExprKind::kInt) {
        // Folded: -5 is one PUSH_INT. (The literal is at most kMaxInt, so its
        // negation cannot overflow.)
        em_.EmitPushInt(-e->left->int_value);
        return;
      }
      CompileExpr(e->left);
      em_.set_line(e->pos.line);
      em_.Emit(e->op == TokenKind::kMinus   ? Opcode::NEG
               : e->op == TokenKind::kTilde ? Opcode::BIT_NOT
                                            : Opcode::NOT);
      return;
    case ExprKind::kBinary:
      CompileLogical(e);
      return;
    case ExprKind::kCall:
      CompileCall(e);
      return;
    case ExprKind::kNew:
      CompileNew(e);
      return;
    case ExprKind::kSpawn:
      CompileSpawn(e);
      return;
    case ExprKind::kField:
    case ExprKind::kIndex:
      CompileExpr(e);  // not reached: spine nodes are handled by CompileExpr
      return;
  }
}

// a && b && c:                        a || b || c:
//     a; JUMP_IF_FALSE F                  a; JUMP_IF_FALSE n1; JUMP T
//     b; JUMP_IF_FALSE F              n1: b; JUMP_IF_FALSE n2; JUMP T
//     c; JUMP_IF_FALSE F              n2: c; JUMP_IF_FALSE F
//     PUSH_INT 1; JUMP End            T:  PUSH_INT 1; JUMP End
// F:  PUSH_INT 0                      F:  PUSH_INT 0
// End:                                End:
// A chain of the same operator is flattened (it is left-nested, and may be
// long); operands with other operators are compiled recursively.
void BytecodeGenerator::CompileLogical(const Expr* e) {
  const TokenKind op = e->op;
  absl::InlinedVector<const Expr*, 8> operands;
  absl::InlinedVector<const Expr*, 8> operators;
  const Expr* node = e;
  while (node->kind == ExprKind::kBinary && node->op == op) {
    operands.push_back(node->right);
    operators.push_back(node);
    node = node->left;
  }
  operands.push_back(node);
  std::reverse(operands.begin(), operands.end());
  std::reverse(operators.begin(), operators.end());

  const int depth = em_.depth();
  std::vector<size_t> false_jumps;
  std::vector<size_t> true_jumps;
  for (size_t i = 0; i < operands.size(); ++i) {
    CompileExpr(operands[i]);
    em_.set_line(operators[i == 0 ? 0 : i - 1]->pos.line);
    const bool last = i + 1 == operands.size();
    if (op == TokenKind::kAndAnd || last) {
      false_jumps.push_back(em_.EmitJump(Opcode::JUMP_IF_FALSE));
    } else {
      const size_t next = em_.EmitJump(Opcode::JUMP_IF_FALSE);
      true_jumps.push_back(em_.EmitJump(Opcode::JUMP));
      em_.PatchJump(next);
    }
  }
  em_.set_line(e->pos.line);
  for (size_t j : true_jumps) em_.PatchJump(j);
  em_.EmitPushInt(1);
  const size_t end = em_.EmitJump(Opcode::JUMP);
  for (size_t j : false_jumps) em_.PatchJump(j);
  em_.set_depth(depth);
  em_.EmitPushInt(0);
  em_.PatchJump(end);
}

void BytecodeGenerator::CompileName(const Expr* e) {
  if (std::optional<int> slot = LookupLocal(e->text)) {
    em_.EmitU16(Opcode::LOAD_LOCAL, static_cast<uint16_t>(std::min(*slot, kMaxLocals - 1)));
  } else if (auto it = ctx_->globals.find(e->text); it != ctx_->globals.end()) {
    em_.EmitU32(Opcode::LOAD_GLOBAL, it->second);
  } else {
    UnknownName(e->pos, NotAValue(e->text));
    em_.Emit(Opcode::PUSH_NULL);
  }
}

bool BytecodeGenerator::CheckArgCount(const Expr* e) {
  if (e->args.size() <= static_cast<size_t>(kMaxArgs)) return true;
  Error(e->args[kMaxArgs]->pos, absl::StrCat("too many arguments (max ", kMaxArgs, ")"));
  return false;
}

void BytecodeGenerator::CompileArgs(const Expr* e) {
  for (const Expr* arg : e->args) CompileExpr(arg);
  em_.set_line(e->pos.line);
}

void BytecodeGenerator::EmitFailedCall(const Expr* e, int depth_before) {
  CompileArgs(e);  // for the errors in the arguments
  em_.set_depth(depth_before);
  em_.Emit(Opcode::PUSH_NULL);
}

void BytecodeGenerator::CompileCall(const Expr* e) {
  const int depth = em_.depth();
  const int argc = static_cast<int>(e->args.size());
  if (!CheckArgCount(e)) return EmitFailedCall(e, depth);
  if (auto it = ctx_->functions.find(e->text); it != ctx_->functions.end()) {
    return CompileUserFunctionCall(Opcode::CALL, e, it->second, depth);
  }
  if (std::optional<Builtin> b = LookupBuiltin(e->text)) {
    const BuiltinInfo& info = GetBuiltinInfo(*b);
    if (argc < info.min_args || (info.max_args >= 0 && argc > info.max_args)) {
      std::string takes;
      if (info.max_args < 0) {
        takes = absl::StrCat("at least ", Plural(info.min_args, "argument"));
      } else if (info.min_args == info.max_args) {
        takes = Plural(info.min_args, "argument");
      } else {
        takes = absl::StrCat(info.min_args, " to ", Plural(info.max_args, "argument"));
      }
      Error(e->name_pos, absl::StrCat("function '", e->text, "' takes ", takes, ", got ", argc));
      return EmitFailedCall(e, depth);
    }
    CompileArgs(e);
    em_.EmitU8U8(Opcode::CALL_BUILTIN, static_cast<uint8_t>(*b), static_cast<uint8_t>(argc));
    return;
  }
  if (ctx_->classes.contains(e->text)) {
    Error(e->name_pos, absl::StrCat("'", e->text, "' is a class: create instances with 'new ",
                                    e->text, "(...)'"));
  } else if (LookupLocal(e->text).has_value() || ctx_->globals.contains(e->text)) {
    Error(e->name_pos, absl::StrCat("'", e->text, "' is a variable, not a function"));
  } else {
    UnknownName(e->name_pos, absl::StrCat("unknown function '", e->text, "'"));
  }
  EmitFailedCall(e, depth);
}

void BytecodeGenerator::CompileNew(const Expr* e) {
  const int depth = em_.depth();
  const int argc = static_cast<int>(e->args.size());
  auto it = ctx_->classes.find(e->text);
  if (it == ctx_->classes.end()) {
    UnknownName(e->name_pos, absl::StrCat("unknown class '", e->text, "'"));
    return EmitFailedCall(e, depth);
  }
  const Klass& klass = *ctx_->program->classes[it->second];
  if (static_cast<uint32_t>(argc) > klass.field_count) {
    Error(e->name_pos, absl::StrCat("class '", e->text, "' has ",
                                    Plural(static_cast<int>(klass.field_count), "field"), ", got ",
                                    Plural(argc, "argument")));
    return EmitFailedCall(e, depth);
  }
  if (!CheckArgCount(e)) return EmitFailedCall(e, depth);
  // The object is allocated before its arguments are evaluated, as the JVM's
  // `new` precedes its constructor's arguments: a tree built recursively
  // (`new Node(build(d - 1), build(d - 1))`) is then laid out in the order
  // it is usually walked, parent before children (measured in commit
  // 1fbcb5e). The object waits on the operand stack, a root, meanwhile.
  em_.EmitU32U8(Opcode::NEW, it->second, 0);
  if (argc == 0) return;
  CompileArgs(e);
  em_.EmitU32U8(Opcode::INIT_FIELDS, it->second, static_cast<uint8_t>(argc));
}

void BytecodeGenerator::CompileSpawn(const Expr* e) {
  const int depth = em_.depth();
  if (!CheckArgCount(e)) return EmitFailedCall(e, depth);
  auto it = ctx_->functions.find(e->text);
  if (it == ctx_->functions.end()) {
    if (LookupBuiltin(e->text).has_value()) {
      Error(e->name_pos,
            absl::StrCat("'spawn' needs a user function; '", e->text, "' is a built-in"));
    } else {
      UnknownName(e->name_pos, absl::StrCat("unknown function '", e->text, "'"));
    }
    return EmitFailedCall(e, depth);
  }
  CompileUserFunctionCall(Opcode::SPAWN, e, it->second, depth);
}

void BytecodeGenerator::CompileUserFunctionCall(Opcode op, const Expr* e, uint32_t index,
                                                int depth) {
  const int argc = static_cast<int>(e->args.size());
  const FnDecl* decl = ctx_->fn_decls[index];
  const int arity = static_cast<int>(decl->params.size());
  if (!decl->malformed && arity != argc) {
    Error(e->name_pos, absl::StrCat("function '", e->text, "' takes ", Plural(arity, "argument"),
                                    ", got ", argc));
    return EmitFailedCall(e, depth);
  }
  CompileArgs(e);
  em_.EmitU32U8(op, index, static_cast<uint8_t>(argc));
}

void BytecodeGenerator::EmitField(Opcode op, const Expr* e) {
  const uint32_t symbol = ctx_->program->symbols.Intern(e->text);
  em_.set_line(e->pos.line);
  em_.EmitU32U32(op, symbol, num_field_caches_++);
}

}  // namespace

void CompileFunctionBody(CompileContext* ctx, const FnDecl& decl, Function* fn) {
  BytecodeGenerator(ctx, fn).CompileFunction(decl);
}

void CompileGlobalInitializers(CompileContext* ctx, const Module& module, Function* fn) {
  BytecodeGenerator(ctx, fn).CompileGlobals(module);
}

}  // namespace minivm::compiler
