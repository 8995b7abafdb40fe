// Lost output (vm/runtime/standard_streams.h): a failed write to the VM's
// streams changes exit code 0 to 1 and is reported on the error stream;
// print stops the program at the first failure.
#include "vm/runtime/standard_streams.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/vm/program_builder.h"

namespace minivm::testing {
namespace {

using ::testing::HasSubstr;

TEST(StandardStreamsTest, NothingLostKeepsTheCode) {
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  std::fputs("fine\n", out);
  EXPECT_EQ(FinishStandardStreams(out, err, 0), 0);
  EXPECT_EQ(FinishStandardStreams(out, err, 7), 7);
  EXPECT_EQ(ReadAll(err), "");
  std::fclose(out);
}

TEST(StandardStreamsTest, AFullDiskAtTheFinalFlushIsExitOneWithTheReason) {
  FILE* out = std::fopen("/dev/full", "w");
  ASSERT_NE(out, nullptr);
  FILE* err = std::tmpfile();
  std::fputs("lost\n", out);  // buffered: the failure shows at the flush
  EXPECT_EQ(FinishStandardStreams(out, err, 0), 1);
  EXPECT_EQ(ReadAll(err),
            "minivm: error: cannot write to the output stream: No space left on device\n");
  std::fclose(out);
}

TEST(StandardStreamsTest, ANonZeroCodeIsKept) {
  FILE* out = std::fopen("/dev/full", "w");
  ASSERT_NE(out, nullptr);
  FILE* err = std::tmpfile();
  std::fputs("lost\n", out);
  EXPECT_EQ(FinishStandardStreams(out, err, 3), 3);
  EXPECT_THAT(ReadAll(err), HasSubstr("No space left on device"));
  std::fclose(out);
}

TEST(StandardStreamsTest, AFailedErrorStreamIsExitOne) {
  FILE* out = std::tmpfile();
  FILE* err = std::fopen("/dev/full", "w");
  ASSERT_NE(err, nullptr);
  std::setvbuf(err, nullptr, _IONBF, 0);  // like stderr
  std::fputs("a diagnostic nobody sees\n", err);
  EXPECT_EQ(FinishStandardStreams(out, err, 0), 1);
  std::fclose(out);
  std::fclose(err);
}

TEST(StandardStreamsTest, TheFirstErrnoSeenIsTheReasonGiven) {
  // A stream whose error flag is set but whose buffer is empty: the flush
  // at exit cannot say why, the errno recorded at the failed write can.
  FILE* out = std::fopen("/dev/full", "w");
  ASSERT_NE(out, nullptr);
  std::fputs("lost\n", out);
  std::fflush(out);
  ASSERT_NE(std::ferror(out), 0);
  FILE* err = std::tmpfile();
  EXPECT_EQ(FinishStandardStreams(out, err, 0, EPIPE), 1);
  EXPECT_THAT(ReadAll(err), HasSubstr("Broken pipe"));
  std::fclose(out);
}

TEST(StandardStreamsTest, PrintStopsTheProgramAtTheFirstLostLine) {
  // main: loop { print(1) }: it only ends because print fails.
  ProgramBuilder pb;
  Asm m;
  const size_t top = m.here();
  m.Int(1).Builtin(Builtin::k_print, 1).Op(Opcode::POP);
  m.Loop(top);
  pb.SetMain(pb.AddFunction("main", 0, 0, 8, m));
  VmOptions options;
  options.heap.max_heap_bytes = size_t{8} << 20;
  options.exit_process = false;
  options.out = std::fopen("/dev/full", "w");
  ASSERT_NE(options.out, nullptr);
  std::setvbuf(options.out, nullptr, _IONBF, 0);  // the first line fails
  options.err = std::tmpfile();
  FILE* out = options.out;
  FILE* err = options.err;
  {
    auto vm = VM::Create(pb.Build(), options);
    ASSERT_TRUE(vm.ok()) << vm.status();
    EXPECT_EQ((*vm)->Run(), 1);
  }
  std::fclose(out);
  EXPECT_EQ(ReadAll(err), "");  // in-process: the exit, not Run, reports it
}

TEST(StandardStreamsTest, ClosedStandardDescriptorsAreOccupiedAndStillFail) {
  // In a child: close stdout, occupy, open a file, print.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(STDOUT_FILENO);
    OccupyClosedStandardFds();
    const int fd = open("/dev/null", O_RDONLY);
    if (fd == STDOUT_FILENO) _exit(10);  // a later file took stdout's number
    if (write(STDOUT_FILENO, "x", 1) != -1 || errno != EBADF) _exit(11);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace minivm::testing
