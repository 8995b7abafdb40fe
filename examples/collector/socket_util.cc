#include "socket_util.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace collector {

bool UnixAddress(const std::string& path, void* out, std::string* error) {
  auto* addr = static_cast<sockaddr_un*>(out);
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr->sun_path) {
    *error = "socket path must have 1 to " + std::to_string(sizeof addr->sun_path - 1) +
             " bytes, not " + std::to_string(path.size());
    return false;
  }
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

ssize_t SendMessage(int sock, const void* buf, size_t len, int fd, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  msghdr msg;
  std::memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    std::memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

ssize_t RecvMessage(int sock, void* buf, size_t len, int flags, int* fd, bool* truncated) {
  *fd = -1;
  *truncated = false;
  iovec iov{buf, len};
  msghdr msg;
  std::memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // Room for a few descriptors, so that a peer sending more than one cannot
  // leak them into this process unnoticed (MSG_CTRUNC would drop them, but
  // the ones that did arrive are closed below).
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) *truncated = true;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof received);
      if (*fd < 0) {
        *fd = received;
      } else {
        close(received);
        *truncated = true;
      }
    }
  }
  return n;
}

bool SetSocketTimeouts(int sock, int seconds) {
  timeval tv{seconds, 0};
  return setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
         setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0;
}

}  // namespace collector
