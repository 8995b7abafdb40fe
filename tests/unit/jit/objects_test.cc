// Fields, elements and built-ins in compiled code (vm/jit/objects.cc).
#include <iterator>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/jit/compiled_ir.h"

namespace minivm::testing {
namespace {

// sum(p) { return p.a + p.b; } over a Pair(1, 2); main calls it 3 times.
std::unique_ptr<Program> FieldsProgram() {
  ProgramBuilder pb;
  const uint32_t pair = pb.AddClass("Pair", {"a", "b"});
  const uint32_t a = pb.Symbol("a");
  const uint32_t b = pb.Symbol("b");
  Asm sum;
  sum.Load(0).GetField(a).Load(0).GetField(b).Op(Opcode::ADD).Ret();
  const uint32_t sum_fn = pb.AddFunction("sum", 1, 1, 2, sum);
  Asm main;
  main.New(pair, 0).Int(1).Int(2).Op(Opcode::INIT_FIELDS).U32(pair).U8(2).Store(0);
  for (int i = 0; i < 3; ++i) main.Load(0).Call(sum_fn, 1).Op(Opcode::POP);
  return BuildWithMain(pb, main, 1, 3);
}

TEST(ObjectsIrTest, ASecondFieldAccessThroughALocalSkipsTheObjectTest) {
  // .field.cache with path_state.h .path.ref: p.a proves p an object, so
  // p.b goes straight to the class test. Each access has its cache and
  // its miss path (ResolveField).
  const std::string ir = CompiledIr(FieldsProgram(), IrTier::kQuick, "sum");
  ASSERT_NE(ir.find("; --print-jit: sum"), std::string::npos) << ir;
  EXPECT_EQ(Count(ir, "@minivm_jit_field_slot("), 2) << ir;
  // The one null test (IsRef: `icmp ne i64 <p>, 0`), for p.a.
  const std::regex null_test(R"(icmp ne i64 %[\w.]+, 0\n)");
  const auto null_tests =
      std::distance(std::sregex_iterator(ir.begin(), ir.end(), null_test), std::sregex_iterator());
  EXPECT_EQ(null_tests, 1) << ir;
}

// put(a, v) { a[0] = v; } on an array; main calls it 3 times.
std::unique_ptr<Program> StoreProgram() {
  ProgramBuilder pb;
  Asm put;
  put.Load(0).Int(0).Load(1).Op(Opcode::SET_INDEX).Null().Ret();
  const uint32_t put_fn = pb.AddFunction("put", 2, 2, 3, put);
  Asm main;
  main.Int(4).Builtin(Builtin::k_array, 1).Store(0);
  for (int i = 0; i < 3; ++i) main.Load(0).Load(0).Call(put_fn, 2).Op(Opcode::POP);
  return BuildWithMain(pb, main, 1, 3);
}

TEST(ObjectsIrTest, AStoredReferenceMarksItsCardAndIsARelease) {
  // .barrier and .memory-model: the element store is a release store, and
  // a card mark (a monotonic byte store) follows for a reference.
  const std::string ir = CompiledIr(StoreProgram(), IrTier::kQuick, "put");
  ASSERT_NE(ir.find("; --print-jit: put"), std::string::npos) << ir;
  EXPECT_NE(ir.find("store atomic i64"), std::string::npos) << ir;
  EXPECT_NE(ir.find("release, align 8"), std::string::npos) << ir;
  EXPECT_NE(ir.find("store atomic i8 1"), std::string::npos) << ir;
  EXPECT_NE(ir.find("monotonic, align 1"), std::string::npos) << ir;
}

}  // namespace
}  // namespace minivm::testing
