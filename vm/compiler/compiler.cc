// Compile(): parse, then a declaration pass that gives every class, function
// and global its index (so that any of them may be used before it is
// declared), then bytecode generation (bytecode_generator.h) for each
// function and for the global initialisers.
#include "vm/compiler/compiler.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "vm/bytecode/builtins.h"
#include "vm/compiler/ast.h"
#include "vm/compiler/bytecode_generator.h"
#include "vm/compiler/parser.h"

namespace minivm {
namespace {

using compiler::ClassDecl;
using compiler::CompileContext;
using compiler::Decl;
using compiler::DeclKind;
using compiler::FnDecl;
using compiler::GlobalDecl;
using compiler::Module;
using compiler::Name;
using compiler::Pos;

constexpr std::string_view kGlobalsFunctionName = "<globals>";

class ProgramBuilder {
 public:
  ProgramBuilder(std::string_view path, std::vector<Diagnostic>* diagnostics)
      : program_(std::make_unique<Program>()) {
    program_->path = std::string(path);
    ctx_.program = program_.get();
    ctx_.diagnostics = diagnostics;
  }

  std::unique_ptr<Program> Build(const Module& module, bool had_syntax_errors);

 private:
  // A top-level name is free: not yet declared and not a built-in function.
  bool ClaimTopLevelName(const Name& name, bool is_callable);
  void DeclareClass(const ClassDecl& decl);
  void DeclareFunction(const FnDecl& decl);
  void DeclareGlobal(const GlobalDecl& decl);
  void CheckParameters(const FnDecl& decl);

  std::unique_ptr<Program> program_;
  CompileContext ctx_;
  absl::flat_hash_set<std::string> top_level_names_;
  // Functions whose name was taken: compiled for their errors only.
  std::vector<std::pair<const FnDecl*, std::unique_ptr<Function>>> shadowed_;
};

bool ProgramBuilder::ClaimTopLevelName(const Name& name, bool is_callable) {
  if (is_callable && LookupBuiltin(name.text).has_value()) {
    ctx_.Error(name.pos, absl::StrCat("cannot redefine built-in function '", name.text, "'"));
    return false;
  }
  if (!top_level_names_.insert(name.text).second) {
    ctx_.Error(name.pos, absl::StrCat("redefinition of '", name.text, "'"));
    return false;
  }
  return true;
}

void ProgramBuilder::DeclareClass(const ClassDecl& decl) {
  if (!ClaimTopLevelName(decl.name, /*is_callable=*/true)) return;
  auto klass = std::make_unique<Klass>();
  klass->kind = gc::LayoutKind::kFields;
  klass->name = decl.name.text;
  klass->index = static_cast<int>(program_->classes.size());
  absl::flat_hash_set<std::string_view> seen;
  for (const Name& field : decl.fields) {
    if (!seen.insert(field.text).second) {
      ctx_.Error(field.pos, absl::StrCat("redefinition of field '", field.text, "'"));
      continue;
    }
    klass->field_symbols.push_back(program_->symbols.Intern(field.text));
  }
  if (klass->field_symbols.size() > static_cast<size_t>(compiler::kMaxFields)) {
    ctx_.Error(decl.name.pos, absl::StrCat("class '", decl.name.text, "' has too many fields (max ",
                                           compiler::kMaxFields, ")"));
  }
  klass->field_count = static_cast<uint32_t>(klass->field_symbols.size());
  ctx_.classes.emplace(decl.name.text, static_cast<uint32_t>(klass->index));
  program_->classes.push_back(std::move(klass));
}

void ProgramBuilder::CheckParameters(const FnDecl& decl) {
  if (decl.params.size() > static_cast<size_t>(compiler::kMaxArgs)) {
    ctx_.Error(decl.params[compiler::kMaxArgs].pos,
               absl::StrCat("too many parameters (max ", compiler::kMaxArgs, ")"));
  }
}

void ProgramBuilder::DeclareFunction(const FnDecl& decl) {
  CheckParameters(decl);
  auto fn = std::make_unique<Function>();
  fn->name = decl.name.text;
  fn->arity = static_cast<uint16_t>(std::min<size_t>(decl.params.size(), 0xFFFF));
  fn->line = decl.pos.line;
  if (!ClaimTopLevelName(decl.name, /*is_callable=*/true)) {
    shadowed_.emplace_back(&decl, std::move(fn));
    return;
  }
  fn->index = static_cast<uint32_t>(program_->functions.size());
  ctx_.functions.emplace(decl.name.text, fn->index);
  ctx_.fn_decls.push_back(&decl);
  program_->functions.push_back(std::move(fn));
}

void ProgramBuilder::DeclareGlobal(const GlobalDecl& decl) {
  // Variables and functions are separate namespaces, so a global may be
  // called `len`; two top-level declarations still may not share a name.
  if (!ClaimTopLevelName(decl.name, /*is_callable=*/false)) return;
  ctx_.globals.emplace(decl.name.text, static_cast<uint32_t>(program_->global_names.size()));
  program_->global_names.push_back(decl.name.text);
}

std::unique_ptr<Program> ProgramBuilder::Build(const Module& module, bool had_syntax_errors) {
  for (const Decl& d : module.decls) {
    switch (d.kind) {
      case DeclKind::kClass:
        DeclareClass(module.classes[d.index]);
        break;
      case DeclKind::kFn:
        DeclareFunction(module.functions[d.index]);
        break;
      case DeclKind::kGlobal:
        DeclareGlobal(module.globals[d.index]);
        break;
    }
  }

  auto main_it = ctx_.functions.find("main");
  if (main_it == ctx_.functions.end()) {
    // With syntax errors, main may well be there but unparseable.
    if (!had_syntax_errors) ctx_.Error(Pos{1, 1}, "no 'main' function");
  } else {
    const FnDecl& main_decl = *ctx_.fn_decls[main_it->second];
    if (!main_decl.params.empty() && !main_decl.malformed) {
      ctx_.Error(main_decl.name.pos, "'main' must take no parameters");
    }
    program_->main_function = main_it->second;
  }

  // Bodies are compiled after every index is known.
  for (size_t i = 0; i < ctx_.fn_decls.size(); ++i) {
    compiler::CompileFunctionBody(&ctx_, *ctx_.fn_decls[i], program_->functions[i].get());
  }
  for (auto& [decl, fn] : shadowed_) compiler::CompileFunctionBody(&ctx_, *decl, fn.get());

  auto init = std::make_unique<Function>();
  init->name = std::string(kGlobalsFunctionName);
  init->index = static_cast<uint32_t>(program_->functions.size());
  init->line = 1;
  compiler::CompileGlobalInitializers(&ctx_, module, init.get());
  program_->init_function = init->index;
  program_->functions.push_back(std::move(init));
  return std::move(program_);
}

}  // namespace

CompileResult Compile(std::string_view path, std::string_view source) {
  CompileResult result;
  std::vector<Diagnostic> diagnostics;
  compiler::ParseResult parsed = compiler::Parse(source, &diagnostics);
  std::unique_ptr<Program> program;
  // After "nesting too deep" the module is a fragment: resolving names in it
  // would only add noise.
  if (!parsed.abandoned) {
    program = ProgramBuilder(path, &diagnostics).Build(parsed.module, parsed.had_errors);
  }
  std::stable_sort(diagnostics.begin(), diagnostics.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return a.line != b.line ? a.line < b.line : a.column < b.column;
                   });
  if (diagnostics.empty()) result.program = std::move(program);
  if (diagnostics.size() > kMaxReportedErrors) {
    // A binary file or the wrong language: the first errors say so; another
    // 17,000 would only bury them.
    const Diagnostic next = diagnostics[kMaxReportedErrors];
    diagnostics.resize(kMaxReportedErrors);
    diagnostics.push_back(Diagnostic{next.line, next.column, "too many errors"});
  }
  result.errors = std::move(diagnostics);
  return result;
}

std::string FormatDiagnostic(std::string_view path, const Diagnostic& d) {
  return absl::StrFormat("%s:%d:%d: error: %s", std::string(path), d.line, d.column, d.message);
}

}  // namespace minivm
