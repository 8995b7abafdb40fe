// Hand-assembled Programs for runtime tests that must not depend on the
// compiler: a tiny assembler over opcodes.h and an in-process VM runner.
#ifndef MINIVM_TESTS_UNIT_VM_PROGRAM_BUILDER_H_
#define MINIVM_TESTS_UNIT_VM_PROGRAM_BUILDER_H_

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gc/object.h"
#include "vm/bytecode/builtins.h"
#include "vm/bytecode/opcodes.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/vm.h"

namespace minivm::testing {

class Asm {
 public:
  explicit Asm(int line = 1) : line_(line) {}

  // Subsequent instructions belong to source line `line`.
  Asm& Line(int line) {
    line_ = line;
    return *this;
  }
  Asm& Op(Opcode op) {
    lines_.Add(static_cast<uint32_t>(code_.size()), line_);
    code_.push_back(static_cast<uint8_t>(op));
    return *this;
  }
  Asm& U8(uint8_t v) {
    code_.push_back(v);
    return *this;
  }
  Asm& U16(uint16_t v) { return Raw(&v, 2); }
  Asm& U32(uint32_t v) { return Raw(&v, 4); }
  Asm& I32(int32_t v) { return Raw(&v, 4); }

  Asm& Int(int64_t i) {
    Op(Opcode::PUSH_INT);
    const uint64_t bits = gc::Value::Int(i).bits();
    return Raw(&bits, 8);
  }
  Asm& Null() { return Op(Opcode::PUSH_NULL); }
  Asm& Str(uint32_t index) { return Op(Opcode::PUSH_STRING).U32(index); }
  Asm& Load(uint16_t slot) { return Op(Opcode::LOAD_LOCAL).U16(slot); }
  Asm& Store(uint16_t slot) { return Op(Opcode::STORE_LOCAL).U16(slot); }
  Asm& LoadGlobal(uint32_t g) { return Op(Opcode::LOAD_GLOBAL).U32(g); }
  Asm& StoreGlobal(uint32_t g) { return Op(Opcode::STORE_GLOBAL).U32(g); }
  Asm& GetField(uint32_t symbol) { return Op(Opcode::GET_FIELD).U32(symbol).U32(caches_++); }
  Asm& SetField(uint32_t symbol) { return Op(Opcode::SET_FIELD).U32(symbol).U32(caches_++); }
  Asm& Call(uint32_t fn, uint8_t argc) { return Op(Opcode::CALL).U32(fn).U8(argc); }
  Asm& Builtin(minivm::Builtin b, uint8_t argc) {
    return Op(Opcode::CALL_BUILTIN).U8(static_cast<uint8_t>(b)).U8(argc);
  }
  Asm& New(uint32_t cls, uint8_t argc) { return Op(Opcode::NEW).U32(cls).U8(argc); }
  Asm& Spawn(uint32_t fn, uint8_t argc) { return Op(Opcode::SPAWN).U32(fn).U8(argc); }
  Asm& Ret() { return Op(Opcode::RETURN); }

  // Forward jumps: emit, then Bind() at the target.
  size_t Jump(Opcode op) {
    Op(op);
    const size_t at = code_.size();
    I32(0);
    return at;
  }
  void Bind(size_t at) {
    const int32_t off = static_cast<int32_t>(code_.size() - (at + 4));
    std::memcpy(&code_[at], &off, 4);
  }
  size_t here() const { return code_.size(); }
  // Backward jump to `target` (an offset from here()).
  Asm& Loop(size_t target) {
    Op(Opcode::LOOP);
    const int32_t off = static_cast<int32_t>(target) - static_cast<int32_t>(code_.size() + 4);
    return I32(off);
  }

  std::vector<uint8_t> code() const { return code_; }
  const LineTable& lines() const { return lines_; }
  uint32_t caches() const { return caches_; }

 private:
  Asm& Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    code_.insert(code_.end(), b, b + n);
    return *this;
  }
  int line_;
  std::vector<uint8_t> code_;
  LineTable lines_;
  uint32_t caches_ = 0;
};

class ProgramBuilder {
 public:
  ProgramBuilder() : program_(std::make_unique<Program>()) {
    program_->path = "test.mv";
    // Function 0: the global initialisers (empty unless replaced).
    Asm init;
    init.Null().Ret();
    AddFunction("<globals>", 0, 0, 1, init);
    program_->init_function = 0;
  }

  uint32_t AddFunction(const std::string& name, uint16_t arity, uint16_t num_locals,
                       uint16_t max_stack, const Asm& code) {
    auto fn = std::make_unique<Function>();
    fn->name = name;
    fn->index = static_cast<uint32_t>(program_->functions.size());
    fn->arity = arity;
    fn->num_locals = num_locals;
    fn->max_stack = max_stack;
    fn->code = code.code();
    fn->lines = code.lines();
    fn->num_field_caches = code.caches();
    fn->field_caches = std::make_unique<FieldCache[]>(code.caches() + 1);
    program_->functions.push_back(std::move(fn));
    return program_->functions.back()->index;
  }
  // Replaces function `index` (for forward references).
  void SetCode(uint32_t index, const Asm& code) {
    Function& fn = *program_->functions[index];
    fn.code = code.code();
    fn.lines = code.lines();
    fn.num_field_caches = code.caches();
    fn.field_caches = std::make_unique<FieldCache[]>(code.caches() + 1);
  }
  void SetMain(uint32_t fn) { program_->main_function = fn; }
  void SetInit(uint32_t fn) { program_->init_function = fn; }

  uint32_t AddClass(const std::string& name, const std::vector<std::string>& fields) {
    auto k = std::make_unique<Klass>();
    k->name = name;
    k->kind = gc::LayoutKind::kFields;
    k->field_count = static_cast<uint32_t>(fields.size());
    for (const auto& f : fields) k->field_symbols.push_back(program_->symbols.Intern(f));
    k->index = static_cast<int>(program_->classes.size());
    program_->classes.push_back(std::move(k));
    return static_cast<uint32_t>(program_->classes.size() - 1);
  }
  uint32_t Symbol(const std::string& name) { return program_->symbols.Intern(name); }
  uint32_t AddString(const std::string& s) {
    program_->string_constants.push_back(s);
    return static_cast<uint32_t>(program_->string_constants.size() - 1);
  }
  uint32_t AddGlobal(const std::string& name) {
    program_->global_names.push_back(name);
    return static_cast<uint32_t>(program_->global_names.size() - 1);
  }

  std::unique_ptr<Program> Build() { return std::move(program_); }

 private:
  std::unique_ptr<Program> program_;
};

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string ReadAll(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

// What a test does to the VM around its run: before Run (install a JIT,
// attach the tool interface) and after it, while the VM still exists (read
// per-function state).
struct RunHooks {
  std::function<void(VM&)> before_run;
  std::function<void(VM&)> after_run;
};

// Runs a program in-process (exit_process off), capturing stdout and stderr;
// a 64 MiB heap unless `options` sets one. If the VM cannot be created, err
// is the reason and exit_code -1.
inline RunResult RunProgram(std::unique_ptr<Program> program, VmOptions options = {},
                            const RunHooks& hooks = {}) {
  RunResult r;
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  options.out = out;
  options.err = err;
  options.exit_process = false;
  if (options.heap.max_heap_bytes == gc::HeapOptions{}.max_heap_bytes) {
    options.heap.max_heap_bytes = size_t{64} << 20;
  }
  {
    absl::StatusOr<std::unique_ptr<VM>> vm = VM::Create(std::move(program), options);
    if (!vm.ok()) {
      r.err = std::string(vm.status().message());
      std::fclose(out);
      std::fclose(err);
      return r;
    }
    if (hooks.before_run) hooks.before_run(**vm);
    r.exit_code = (*vm)->Run();
    if (hooks.after_run) hooks.after_run(**vm);
  }
  r.out = ReadAll(out);
  r.err = ReadAll(err);
  return r;
}

// Emits `slot = 0; while (slot < limit) slot = slot + 1;` into `a`. `step`
// replaces the + 1 when given: it finds slot and 1 on the stack and leaves
// the new value (a call of add(slot, 1), say).
inline void EmitCountingLoop(Asm& a, uint16_t slot, int64_t limit,
                             const std::function<void(Asm&)>& step = {}) {
  a.Int(0).Store(slot);
  const size_t head = a.here();
  a.Load(slot).Int(limit).Op(Opcode::LT);
  const size_t exit = a.Jump(Opcode::JUMP_IF_FALSE);
  a.Load(slot).Int(1);
  if (step) {
    step(a);
  } else {
    a.Op(Opcode::ADD);
  }
  a.Store(slot).Loop(head);
  a.Bind(exit);
}

// Ends `main` with `return null`, makes it the program's main function
// (no arguments, `locals` locals, stack depth `stack`) and builds.
inline std::unique_ptr<Program> BuildWithMain(ProgramBuilder& pb, Asm main, uint16_t locals,
                                              uint16_t stack) {
  main.Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, locals, stack, main));
  return pb.Build();
}

// A main body that calls `fn` with 0, 1, ..., times - 1, dropping each result.
inline Asm CallsWithInts(uint32_t fn, int times = 3) {
  Asm main;
  for (int i = 0; i < times; ++i) main.Int(i).Call(fn, 1).Op(Opcode::POP);
  return main;
}

// `1; if (!1) skip; 2; skip: 7; return`: the two paths reach `7` at
// different stack depths. The interpreter runs it (RETURN takes the top, 7)
// but the bytecode verifier refuses it, so the JIT does too.
inline Asm InconsistentDepthCode() {
  Asm a;
  a.Int(1);
  const size_t skip = a.Jump(Opcode::JUMP_IF_FALSE);
  a.Int(2);
  a.Bind(skip);
  a.Int(7).Ret();
  return a;
}

// Adds `main` (no parameters; `locals` locals; `stack` operand slots) to
// `pb`, then runs the program as RunProgram does.
inline RunResult RunMain(ProgramBuilder& pb, const Asm& main, uint16_t locals = 2,
                         uint16_t stack = 16, VmOptions options = {}) {
  pb.SetMain(pb.AddFunction("main", 0, locals, stack, main));
  return RunProgram(pb.Build(), options);
}

// Runs `main` as RunMain does, for a program that must succeed: returns its
// stdout, or, if it did not exit with 0, a description of what happened
// instead (which no expected output equals, so the comparison shows it).
inline std::string RunMainOutput(ProgramBuilder& pb, const Asm& main, uint16_t locals = 2,
                                 uint16_t stack = 16, VmOptions options = {}) {
  RunResult r = RunMain(pb, main, locals, stack, std::move(options));
  if (r.exit_code == 0) return r.out;
  return "exit code " + std::to_string(r.exit_code) + " (want 0); stdout: " + r.out +
         "; stderr: " + r.err;
}

// Runs `main` as RunMain does, for a program that must fail with a runtime
// error: returns its stderr (the error line and the stack trace), or, if it
// did not exit with 1, a description of what happened instead (which no
// expected error text equals, so the test's comparison fails and shows it).
inline std::string RunMainError(ProgramBuilder& pb, const Asm& main, uint16_t locals = 2,
                                uint16_t stack = 16) {
  RunResult r = RunMain(pb, main, locals, stack);
  if (r.exit_code == 1) return r.err;
  return "exit code " + std::to_string(r.exit_code) + " (want 1); stdout: " + r.out +
         "; stderr: " + r.err;
}

// main() { return null; }: for tests of what happens around any program.
inline std::unique_ptr<Program> ReturnNullProgram() {
  ProgramBuilder pb;
  Asm m;
  m.Null().Ret();
  pb.SetMain(pb.AddFunction("main", 0, 0, 1, m));
  return pb.Build();
}

// The first line of an error output: the error itself, without the trace.
inline std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace minivm::testing

#endif  // MINIVM_TESTS_UNIT_VM_PROGRAM_BUILDER_H_
