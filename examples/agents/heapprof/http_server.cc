#include "http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace heapprof {
namespace {

constexpr size_t kMaxRequest = 8192;

bool SendAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    default:
      return "Internal Server Error";
  }
}

}  // namespace

HttpServer::~HttpServer() { Stop(); }

bool HttpServer::Listen(int port, std::string* error) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // loopback only, never 0.0.0.0
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(fd, 16) != 0) {
    *error = "127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
    close(fd);
    return false;
  }
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len) != 0) {
    *error = std::string("getsockname: ") + std::strerror(errno);
    close(fd);
    return false;
  }
  listen_fd_ = fd;
  port_ = ntohs(addr.sin_port);
  return true;
}

void HttpServer::Start(Handler handler) {
  if (listen_fd_ < 0 || thread_.joinable()) return;
  handler_ = std::move(handler);
  // The server thread must not take the program's signals (SIGUSR2 is
  // handled wherever it lands, but keep the VM's threads the only targets).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { Run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void HttpServer::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

void HttpServer::Run() {
  while (!stop_.load()) {
    struct pollfd p = {listen_fd_, POLLIN, 0};
    int r = poll(&p, 1, 100);  // wake up to notice Stop()
    if (r <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Serve(fd);
    close(fd);
  }
}

void HttpServer::Serve(int fd) {
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string req;
  char buf[2048];
  while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
    if (req.size() > kMaxRequest || stop_.load()) return;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    req.append(buf, static_cast<size_t>(n));
  }
  HttpResponse resp;
  size_t sp1 = req.find(' ');
  size_t sp2 = sp1 == std::string::npos ? sp1 : req.find(' ', sp1 + 1);
  size_t eol = req.find_first_of("\r\n");
  if (sp1 == std::string::npos || sp2 == std::string::npos || sp2 > eol) {
    resp.status = 400;
  } else {
    std::string method = req.substr(0, sp1);
    std::string target = req.substr(sp1 + 1, sp2 - sp1 - 1);
    if (method != "GET" && method != "HEAD") {
      resp.status = 405;
    } else {
      size_t q = target.find('?');
      std::string path = target.substr(0, q);
      std::string query = q == std::string::npos ? "" : target.substr(q + 1);
      resp = handler_(path, query);
      if (method == "HEAD") {
        std::string len = std::to_string(resp.body.size());
        resp.body.clear();
        resp.extra_headers += "X-Content-Length: " + len + "\r\n";
      }
    }
  }
  if (resp.status != 200 && resp.body.empty()) {
    resp.content_type = "text/plain; charset=utf-8";
    resp.body = std::string(Reason(resp.status)) + "\n";
  }
  std::string head = "HTTP/1.1 " + std::to_string(resp.status) + " " + Reason(resp.status) +
                     "\r\nContent-Type: " + resp.content_type +
                     "\r\nContent-Length: " + std::to_string(resp.body.size()) +
                     "\r\nConnection: close\r\n" + resp.extra_headers + "\r\n";
  if (SendAll(fd, head)) SendAll(fd, resp.body);
  shutdown(fd, SHUT_WR);
}

}  // namespace heapprof
