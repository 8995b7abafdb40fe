#include "output.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace agent {

bool WriteFileAtomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp" + std::to_string(static_cast<long>(getpid()));
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      close(fd);
      unlink(tmp.c_str());
      errno = e;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    unlink(tmp.c_str());
    errno = e;
    return false;
  }
  return true;
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
