#include "vm/runtime/options.h"

#include <vector>

#include "gtest/gtest.h"

namespace minivm {
namespace {

absl::StatusOr<Options> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "minivm");
  return ParseOptions(static_cast<int>(args.size()), args.data());
}

TEST(OptionsTest, Sizes) {
  EXPECT_EQ(*ParseSize("512k"), size_t{512} << 10);
  EXPECT_EQ(*ParseSize("64m"), size_t{64} << 20);
  EXPECT_EQ(*ParseSize("1G"), size_t{1} << 30);
  EXPECT_EQ(*ParseSize("1048576"), size_t{1} << 20);
  EXPECT_FALSE(ParseSize("").ok());
  EXPECT_FALSE(ParseSize("m").ok());
  EXPECT_FALSE(ParseSize("-1m").ok());
  EXPECT_FALSE(ParseSize("1x").ok());
  EXPECT_FALSE(ParseSize("99999999999g").ok());
}

TEST(OptionsTest, DefaultsAndProgramArguments) {
  absl::StatusOr<Options> o = Parse({"prog.mv", "--heap=1m", "x"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->heap_bytes, size_t{1} << 30);
  EXPECT_EQ(o->stack_depth, 10000u);
  EXPECT_EQ(o->seed, 0u);
  EXPECT_EQ(o->jit, JitMode::kAuto);
  EXPECT_EQ(o->jit_threshold, 1000u);
  EXPECT_FALSE(o->jit_sync);
  EXPECT_FALSE(o->verbose_jit);
  EXPECT_FALSE(o->print_jit);
  EXPECT_EQ(o->program_path, "prog.mv");
  EXPECT_EQ(o->program_args, (std::vector<std::string>{"--heap=1m", "x"}));
}

TEST(OptionsTest, AllOptions) {
  absl::StatusOr<Options> o =
      Parse({"--heap=64m", "--young=8m", "--seed=42", "--stack-depth=500", "--verbose:gc",
             "--verify-heap", "--gc-stress=3", "--disassemble", "--jit=off", "p.mv"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->heap_bytes, size_t{64} << 20);
  EXPECT_EQ(o->young_bytes, size_t{8} << 20);
  EXPECT_EQ(o->seed, 42u);
  EXPECT_EQ(o->stack_depth, 500u);
  EXPECT_TRUE(o->verbose_gc);
  EXPECT_TRUE(o->verify_heap);
  EXPECT_EQ(o->gc_stress, 3u);
  EXPECT_TRUE(o->disassemble);
}

TEST(OptionsTest, JitOptions) {
  absl::StatusOr<Options> o = Parse({"--jit=eager", "--jit-threshold=7", "--jit-sync",
                                     "--verbose:jit", "--print-jit=fib", "p.mv"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->jit, JitMode::kEager);
  EXPECT_EQ(o->jit_threshold, 7u);
  EXPECT_TRUE(o->jit_sync);
  EXPECT_TRUE(o->verbose_jit);
  EXPECT_TRUE(o->print_jit);
  EXPECT_EQ(o->print_jit_only, "fib");
  EXPECT_EQ(o->jit_opt_level, 2);
  EXPECT_EQ(Parse({"--jit-opt=1", "p.mv"})->jit_opt_level, 1);
  EXPECT_EQ(Parse({"--jit=off", "p.mv"})->jit, JitMode::kOff);
  EXPECT_EQ(Parse({"--jit=auto", "p.mv"})->jit, JitMode::kAuto);
  EXPECT_TRUE(Parse({"--print-jit", "p.mv"})->print_jit_only.empty());
}

TEST(OptionsTest, Errors) {
  EXPECT_EQ(Parse({}).status().message(), "no program given (try --help)");
  EXPECT_EQ(Parse({"--bogus", "p.mv"}).status().message(), "unknown option '--bogus'");
  EXPECT_EQ(Parse({"--heap=12q", "p.mv"}).status().message(), "--heap: invalid size '12q'");
  EXPECT_EQ(Parse({"--young=64m", "--heap=64m", "p.mv"}).status().message(),
            "--young: the young generation must be smaller than the heap");
  EXPECT_EQ(Parse({"--jit=fast", "p.mv"}).status().message(),
            "invalid value 'fast' for --jit (expected off, auto or eager)");
  EXPECT_FALSE(Parse({"--jit-threshold=0", "p.mv"}).ok());
  EXPECT_FALSE(Parse({"--print-jit=", "p.mv"}).ok());
  EXPECT_FALSE(Parse({"--jit-opt=4", "p.mv"}).ok());
  EXPECT_FALSE(Parse({"--jit=fast", "p.mv"}).ok());
  EXPECT_FALSE(Parse({"--tlab-size=8", "p.mv"}).ok());
  EXPECT_FALSE(Parse({"--stack-depth=0", "p.mv"}).ok());
  EXPECT_FALSE(Parse({"--gc-stress=x", "p.mv"}).ok());
  EXPECT_FALSE(Parse({"--seed=-1", "p.mv"}).ok());
  EXPECT_FALSE(Parse({"--heap", "p.mv"}).ok());
  // Not "unknown option": the option exists and needs its file.
  for (const char* bare : {"--heap-profile", "--heap-profile="}) {
    EXPECT_EQ(Parse({bare, "p.mv"}).status().message(),
              "--heap-profile needs a file: --heap-profile=FILE (e.g. --heap-profile=heap.pb.gz)")
        << bare;
  }
  EXPECT_FALSE(Parse({"--heap-profile=a,b", "p.mv"}).ok());
}

TEST(OptionsTest, HelpAndVersionNeedNoProgram) {
  EXPECT_TRUE(Parse({"--help"})->help);
  EXPECT_TRUE(Parse({"--version"})->version);
}

TEST(OptionsTest, AgentsKeptInOrderAsWritten) {
  absl::StatusOr<Options> o =
      Parse({"-agentpath:/x.so", "-agentlib:foo=a=b,c", "--tlab-size=256", "p.mv", "-agentlib:arg"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->agents, (std::vector<std::string>{"-agentpath:/x.so", "-agentlib:foo=a=b,c"}));
  EXPECT_EQ(o->tlab_bytes, 256u);
  EXPECT_EQ(o->program_args, std::vector<std::string>{"-agentlib:arg"});
}

}  // namespace
}  // namespace minivm
