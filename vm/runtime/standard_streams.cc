#include "vm/runtime/standard_streams.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

namespace minivm {
namespace {

const char* StreamName(std::FILE* f) {
  if (f == stdout) return "stdout";
  if (f == stderr) return "stderr";
  return "the output stream";
}

std::mutex g_lost_mu;
std::string g_lost_output;  // guarded by g_lost_mu: the first NoteLostOutput's message

// Flushes f; returns 0 if nothing written to it was lost, else an errno
// (`known`, the one from the flush, or EIO when neither says).
int FlushAndCheck(std::FILE* f, int known) {
  errno = 0;
  const int flushed = std::fflush(f);
  const int flush_errno = errno;
  if (flushed == 0 && std::ferror(f) == 0) return 0;
  if (known != 0) return known;
  return flush_errno != 0 ? flush_errno : EIO;
}

}  // namespace

void OccupyClosedStandardFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // open returns the lowest free number: this one, as every lower one is
    // open by now. Without /dev/null (a bare chroot) writes still fail with
    // EBADF; only the reuse of the number is left unprevented.
    const int got = open("/dev/null", O_RDONLY);
    if (got >= 0 && got != fd) close(got);
  }
}

int FinishStandardStreams(std::FILE* out, std::FILE* err, int code, int out_errno) {
  const int out_failed = FlushAndCheck(out, out_errno);
  int err_failed = err != out ? FlushAndCheck(err, 0) : 0;
  if (out != stdout && err != stdout) std::fflush(stdout);
  if (out != stderr && err != stderr) std::fflush(stderr);
  if (out_failed != 0 && err_failed == 0) {
    std::fprintf(err, "minivm: error: cannot write to %s: %s\n", StreamName(out),
                 std::strerror(out_failed));
    err_failed = FlushAndCheck(err, 0);
  }
  std::string lost;
  {
    std::lock_guard<std::mutex> lock(g_lost_mu);
    lost = g_lost_output;
  }
  if (!lost.empty() && err_failed == 0) {
    std::fprintf(err, "minivm: error: %s\n", lost.c_str());
    err_failed = FlushAndCheck(err, 0);
  }
  if ((out_failed != 0 || err_failed != 0 || !lost.empty()) && code == 0) return 1;
  return code;
}

void NoteLostOutput(std::string message) {
  std::lock_guard<std::mutex> lock(g_lost_mu);
  if (g_lost_output.empty()) g_lost_output = std::move(message);
}

void ExitWithoutFlushing(int code) {
  syscall(SYS_exit_group, code);
  _exit(code);  // not reached
}

}  // namespace minivm
