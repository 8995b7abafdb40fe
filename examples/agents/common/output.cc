#include "output.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace agent {

namespace {

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Follows symlinks at `path` itself (not in its directories, which the
// kernel follows anyway). False (errno set) on a loop or a read error.
bool ResolveLinks(const std::string& path, std::string* out) {
  std::string p = path;
  for (int i = 0; i < 40; ++i) {
    struct stat st;
    if (lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
      *out = p;
      return true;  // absent or not a link: the name itself
    }
    char buf[4096];
    const ssize_t n = readlink(p.c_str(), buf, sizeof buf - 1);
    if (n < 0) return false;
    std::string target(buf, static_cast<size_t>(n));
    p = (!target.empty() && target[0] == '/') ? target : DirName(p) + "/" + target;
  }
  errno = ELOOP;
  return false;
}

// write(2) with SIGPIPE blocked on the calling thread: a pipe or FIFO
// whose reader has gone gives EPIPE, an error like any other, instead of
// killing the program being profiled. The SIGPIPE the kernel then queues
// for this thread (also after a partial write, which returns a count) is
// consumed, unless one was already pending before.
ssize_t WriteNoSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_set, old_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigemptyset(&pending);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  const ssize_t n = write(fd, data, size);
  const int err = errno;
  if (!was_pending) {
    sigemptyset(&pending);
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      const struct timespec zero = {0, 0};
      while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  errno = err;
  return n;
}

bool WriteAll(int fd, std::string_view data, int64_t* written = nullptr) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = WriteNoSigpipe(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
    if (written != nullptr) *written += n;
  }
  return true;
}

std::atomic<unsigned> g_temp_seq{0};

}  // namespace

bool CheckOutputPath(const std::string& path, std::string* error) {
  if (path.empty()) {
    *error = "empty file name";
    return false;
  }
  std::string target;
  if (!ResolveLinks(path, &target)) {
    *error = std::strerror(errno);
    return false;
  }
  struct stat st;
  if (stat(target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      *error = "is a directory";
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      // Written in place: it must accept writes (a FIFO need not have a
      // reader yet, so it is not opened here).
      if (access(target.c_str(), W_OK) != 0) {
        *error = std::strerror(errno);
        return false;
      }
      return true;
    }
  } else if (errno != ENOENT) {
    *error = std::strerror(errno);
    return false;
  }
  const std::string dir = DirName(target);
  if (stat(dir.c_str(), &st) != 0) {
    *error = errno == ENOENT ? "directory " + dir + " does not exist" : std::strerror(errno);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *error = dir + " is not a directory";
    return false;
  }
  // The file is replaced by rename(), so the directory is what must be
  // writable (EROFS included).
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    *error = "directory " + dir + " is not writable: " + std::strerror(errno);
    return false;
  }
  return true;
}

void DeclareOutputOption(OptionParser* options, const char* key, std::string* out) {
  options->Text(key, out, "a file path", [](const std::string& path) {
    std::string error;
    return CheckOutputPath(path, &error) ? std::string() : "cannot write " + path + ": " + error;
  });
}

bool WriteOutput(const std::string& path, const std::string& data, std::string* error) {
  auto fail = [&](int err) {
    *error = "cannot write " + path + ": " + std::strerror(err);
    return false;
  };
  std::string target;
  if (!ResolveLinks(path, &target)) return fail(errno);
  struct stat st;
  if (stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return fail(EISDIR);
    // Not waiting for a FIFO's reader: with O_NONBLOCK, open fails at once
    // (ENXIO) when there is none, where a plain open would wait for one, at
    // VM death for ever. With a reader, writes go back to blocking.
    const int fd = open(target.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
      if (errno == ENXIO && S_ISFIFO(st.st_mode)) {
        *error = "cannot write " + path + ": no process has the FIFO open for reading";
        return false;
      }
      return fail(errno);
    }
    const int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    const bool ok = WriteAll(fd, data);
    const int err = errno;
    if (close(fd) != 0 && ok) return fail(errno);
    return ok ? true : fail(err);
  }
  // O_EXCL on a name unique to this process and call; mode 0666 lets the
  // umask decide the permissions, as for any file the user creates.
  const std::string tmp = target + ".tmp" + std::to_string(static_cast<long>(getpid())) + "." +
                          std::to_string(g_temp_seq.fetch_add(1));
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return fail(errno);
  if (!WriteAll(fd, data)) {
    const int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return fail(err);
  }
  if (close(fd) != 0 || rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return fail(err);
  }
  return true;
}

OutputStream::~OutputStream() {
  if (fd_ >= 0) close(fd_);
}

bool OutputStream::Open(const std::string& path, std::string* error) {
  std::string why;
  if (!CheckOutputPath(path, &why)) {
    *error = "cannot write " + path + ": " + why;
    return false;
  }
  // open(2) follows a symlink; O_TRUNC empties a regular file in place and
  // is ignored by devices and FIFOs.
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  path_ = path;
  fd_ = fd;
  return true;
}

void OutputStream::Write(std::string_view data) {
  if (fd_ < 0 || error_ != 0) return;
  buffer_.append(data.data(), data.size());
  if (buffer_.size() >= (64u << 10)) Flush();
}

void OutputStream::Flush() {
  if (error_ == 0 && !buffer_.empty() && !WriteAll(fd_, buffer_, &written_)) error_ = errno;
  buffer_.clear();
}

bool OutputStream::Close(std::string* error) {
  if (fd_ < 0) return true;
  Flush();
  if (close(fd_) != 0 && error_ == 0) error_ = errno;
  fd_ = -1;
  if (error_ == 0) return true;
  *error = "cannot write " + path_ + ": " + std::strerror(error_) + " (after " +
           std::to_string(written_) + " bytes)";
  return false;
}

namespace {
std::atomic<bool> g_output_failed{false};
}  // namespace

void NoteOutputFailed() { g_output_failed.store(true); }

void EmitReport(const char* agent, const std::string& file, const std::string& report) {
  if (report.empty()) return;
  if (!file.empty()) {
    std::string error;
    if (WriteOutput(file, report, &error)) return;
    std::fprintf(stderr, "%s: %s; the report follows\n", agent, error.c_str());
    NoteOutputFailed();
  }
  std::fputs(report.c_str(), stderr);
  std::fflush(stderr);
}

void ExitIfOutputFailed() {
  if (!g_output_failed.load()) return;
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(1);
}

std::string HumanBytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = bytes < 0 ? -bytes : bytes;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  char buf[64];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%s%.0f B", bytes < 0 ? "-" : "", v);
  } else {
    std::snprintf(buf, sizeof buf, "%s%.1f %s", bytes < 0 ? "-" : "", v, kUnits[u]);
  }
  return buf;
}

int64_t WallNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string NumberedPath(const std::string& path, int n) {
  char num[16];
  std::snprintf(num, sizeof num, ".%04d", n);
  const std::string kPb = ".pb.gz";
  size_t slash = path.rfind('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t cut;
  if (path.size() - base > kPb.size() &&
      path.compare(path.size() - kPb.size(), kPb.size(), kPb) == 0) {
    cut = path.size() - kPb.size();
  } else {
    size_t dot = path.rfind('.');
    cut = (dot == std::string::npos || dot <= base) ? path.size() : dot;
  }
  return path.substr(0, cut) + num + path.substr(cut);
}

}  // namespace agent
