// httplib.h is included without the library's pkg-config CFLAGS
// (CPPHTTPLIB_OPENSSL_SUPPORT, ...): see CMakeLists.txt.
#include "http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace heapprof {
namespace {

using Clock = std::chrono::steady_clock;

// Set on the thread that runs a connection (http_server.h .threads): when the
// connection was accepted, and whether it is to be turned away.
thread_local Clock::time_point t_accepted;
thread_local bool t_reject = false;

class WorkerPool final : public httplib::TaskQueue {
 public:
  WorkerPool(int workers, size_t max_queued) : max_queued_(max_queued) {
    try {
      for (int i = 0; i < workers; i++) threads_.emplace_back([this] { Work(); });
    } catch (const std::exception&) {
      // Fewer workers (at worst none: enqueue then runs connections inline).
    }
  }
  ~WorkerPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    Clock::time_point now = Clock::now();
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!threads_.empty() && jobs_.size() < max_queued_) {
        jobs_.push_back(Job{std::move(fn), now});
        cv_.notify_one();
        return;
      }
    }
    // Full (or no worker): the connection is turned away at once, here on
    // the accept thread, without waiting for anything.
    t_accepted = now;
    t_reject = !threads_.empty();
    fn();
    t_reject = false;
  }

  // Runs what is queued (connections of a stopping server end at once),
  // then joins the workers.
  void shutdown() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stopped_) return;
      stopped_ = true;
      cv_.notify_all();
    }
    for (std::thread& t : threads_) t.join();
  }

 private:
  struct Job {
    std::function<void()> fn;
    Clock::time_point accepted;
  };

  void Work() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      cv_.wait(lk, [this] { return stopped_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopped_
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      lk.unlock();
      t_accepted = job.accepted;
      job.fn();
      lk.lock();
    }
  }

  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;  // guarded by mu_
  bool stopped_ = false;  // guarded by mu_
  std::vector<std::thread> threads_;
};

enum class WaitResult { kReady, kTimeout, kStop };

// One connection's socket I/O for httplib, with the deadlines of
// http_server.h .deadlines. The request head is read (and checked) before httplib parses it,
// then served to it from the buffer.
class Connection final : public httplib::Stream {
 public:
  enum class Head { kComplete, kClosed, kTimeout, kStop, kUriTooLong, kTooLarge };

  Connection(int fd, int wake_fd, const std::atomic<bool>* stopping, Clock::time_point accepted,
             bool no_wait)
      : fd_(fd),
        wake_fd_(wake_fd),
        stopping_(stopping),
        read_deadline_(accepted + std::chrono::seconds(HttpServer::kReadTimeoutSeconds)),
        no_wait_(no_wait) {}

  Head ReadHead() {
    size_t line_start = 0, scanned = 0;
    bool first_line = true;
    while (true) {
      for (; scanned < buf_.size(); scanned++) {
        if (scanned >= HttpServer::kMaxHead) return Head::kTooLarge;
        if (scanned + 1 - line_start > HttpServer::kMaxLine) {
          return first_line ? Head::kUriTooLong : Head::kTooLarge;
        }
        if (buf_[scanned] != '\n') continue;
        size_t len = scanned + 1 - line_start;
        bool blank = len == 1 || (len == 2 && buf_[line_start] == '\r');
        line_start = scanned + 1;
        if (blank) {
          head_end_ = line_start;
          return Head::kComplete;  // (a blank first line is httplib's to reject)
        }
        first_line = false;
      }
      char tmp[4096];
      ssize_t n = recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n > 0) {
        buf_.append(tmp, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) return Head::kClosed;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Head::kClosed;
      WaitResult w = Wait(POLLIN, read_deadline_);
      if (w == WaitResult::kTimeout) return Head::kTimeout;
      if (w == WaitResult::kStop) return Head::kStop;
    }
  }

  // The body its Content-Length headers announce, judged from the head
  // alone, before httplib reads any of it (http_server.h, "Limits"), by Go's
  // net/http's rules: every Content-Length header must have the same value,
  // a decimal number below 2^63.
  enum class Length { kOk, kBad, kTooLarge };
  Length CheckContentLength() const {
    bool seen = false;
    std::string value;
    size_t start = buf_.find('\n');  // the request line is not a header
    while (start != std::string::npos && start + 1 < head_end_) {
      const size_t line = start + 1;
      const size_t end = buf_.find('\n', line);
      start = end;
      const size_t colon = buf_.find(':', line);
      if (colon == std::string::npos || colon > end) continue;
      if (!EqualsNoCase(buf_.substr(line, colon - line), "content-length")) continue;
      std::string v = Trim(buf_.substr(colon + 1, end - colon - 1));
      if (seen && v != value) return Length::kBad;
      seen = true;
      value = std::move(v);
    }
    if (!seen) return Length::kOk;
    // 19 digits fit in 64 bits; 2^63 and more is bad, as in Go.
    if (value.empty() || value.size() > 19) return Length::kBad;
    uint64_t n = 0;
    for (char ch : value) {
      if (ch < '0' || ch > '9') return Length::kBad;
      n = n * 10 + static_cast<uint64_t>(ch - '0');
    }
    if (n > static_cast<uint64_t>(INT64_MAX)) return Length::kBad;
    return n > HttpServer::kMaxBody ? Length::kTooLarge : Length::kOk;
  }

  // The end of the request's headers: the response's clock starts.
  void StartResponse() {
    write_deadline_ = Clock::now() + std::chrono::seconds(HttpServer::kWriteTimeoutSeconds);
  }

  // A response written without httplib (no request was parsed).
  void SendPlain(int status, const char* reason, const std::string& body) {
    char head[256];
    std::snprintf(head, sizeof head,
                  "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                  status, reason, body.size());
    if (SendAll(head, std::strlen(head))) SendAll(body.data(), body.size());
  }

  // Closes the socket. If the client sent bytes that were not read (a
  // rejected head, an unread body), they are drained for a moment first:
  // closing with unread data sends a reset, which may destroy the response
  // before the client reads it (Go's closeWriteAndWait).
  void Close() {
    pollfd p = {fd_, POLLIN, 0};
    bool unread = pos_ < buf_.size() || poll(&p, 1, 0) > 0;
    if (unread && !no_wait_) {
      shutdown(fd_, SHUT_WR);
      Clock::time_point deadline = Clock::now() + std::chrono::seconds(1);
      size_t drained = 0;
      char tmp[4096];
      while (drained < 4 * HttpServer::kMaxHead && Wait(POLLIN, deadline) == WaitResult::kReady) {
        ssize_t n = recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
        if (n > 0) {
          drained += static_cast<size_t>(n);
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
          break;
        }
      }
    }
    close(fd_);
  }

  // httplib::Stream.
  bool is_readable() const override {
    return pos_ < buf_.size() || Wait(POLLIN, read_deadline_) == WaitResult::kReady;
  }
  bool is_writable() const override {
    return !stopping_->load() && Wait(POLLOUT, WriteWaitDeadline()) == WaitResult::kReady;
  }
  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < buf_.size()) {
      size_t n = std::min(size, buf_.size() - pos_);
      std::memcpy(ptr, buf_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    while (true) {
      ssize_t n = recv(fd_, ptr, size, MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (Wait(POLLIN, read_deadline_) != WaitResult::kReady) return -1;
    }
  }
  ssize_t write(const char* ptr, size_t size) override {
    return SendAll(ptr, size) ? static_cast<ssize_t>(size) : -1;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a;
    socklen_t len = sizeof a;
    if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) Describe(a, &ip, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a;
    socklen_t len = sizeof a;
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) Describe(a, &ip, &port);
  }
  socket_t socket() const override { return fd_; }

 private:
  static bool EqualsNoCase(const std::string& a, const char* b) {
    size_t i = 0;
    for (; i < a.size() && b[i] != '\0'; i++) {
      if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
    }
    return i == a.size() && b[i] == '\0';
  }

  // Without the spaces, tabs and CR around a header's value.
  static std::string Trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && (s[b] == ' ' || s[b] == '\t')) b++;
    while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) e--;
    return s.substr(b, e - b);
  }

  static void Describe(const sockaddr_storage& a, std::string* ip, int* port) {
    char buf[INET6_ADDRSTRLEN] = "";
    if (a.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
      inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
      *port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
      inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
      *port = ntohs(in6->sin6_port);
    }
    *ip = buf;
  }

  Clock::time_point WriteWaitDeadline() const {
    return std::min(write_deadline_,
                    Clock::now() + std::chrono::seconds(HttpServer::kWriteStallSeconds));
  }

  bool SendAll(const char* p, size_t n) {
    while (n > 0) {
      ssize_t k = send(fd_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        p += k;
        n -= static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
      // A stopping server, or the accept thread turning a client away, never
      // waits for a client to read.
      if (no_wait_ || stopping_->load()) return false;
      if (Wait(POLLOUT, WriteWaitDeadline()) != WaitResult::kReady) return false;
    }
    return true;
  }

  // Waits for `events` on the socket, the deadline, or Stop().
  WaitResult Wait(short events, Clock::time_point deadline) const {
    while (true) {
      if (stopping_->load()) return WaitResult::kStop;
      Clock::time_point now = Clock::now();
      if (now >= deadline) return WaitResult::kTimeout;
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
      pollfd p[2] = {{fd_, events, 0}, {wake_fd_, POLLIN, 0}};
      int r = poll(p, 2, static_cast<int>(std::min<int64_t>(ms, 3600 * 1000)));
      if (r < 0 && errno != EINTR) return WaitResult::kTimeout;
      if (r <= 0) continue;
      if (p[1].revents != 0) return WaitResult::kStop;
      if (p[0].revents != 0) return WaitResult::kReady;
    }
  }

  const int fd_;
  const int wake_fd_;
  const std::atomic<bool>* const stopping_;
  const Clock::time_point read_deadline_;
  Clock::time_point write_deadline_ = Clock::time_point::max();
  const bool no_wait_;
  std::string buf_;      // the request head, and whatever came with it
  size_t head_end_ = 0;  // the head is buf_[0, head_end_) once complete
  size_t pos_ = 0;       // httplib has read buf_[0, pos_)
};

constexpr const char* kText = "text/plain; charset=utf-8";

class CppHttplibServer final : public HttpServer, public httplib::Server {
 public:
  CppHttplibServer() : wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    set_keep_alive_max_count(1);  // http_server.h .one-request
    set_payload_max_length(kMaxBody);
    set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      // A POST's body is read after pre-routing: it goes to the route below.
      if (req.method == "POST") return HandlerResponse::Unhandled;
      Respond(req, res);
      return HandlerResponse::Handled;
    });
    Post(".*", [this](const httplib::Request& req, httplib::Response& res) { Respond(req, res); });
    set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
      res.headers.erase("Accept-Ranges");  // added to HEAD responses only (http_server.h .no-compression)
    });
    set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      res.status = 500;
      res.set_content("heapprof: internal error\n", kText);
    });
    // The library's default sets SO_REUSEPORT, which would let a second VM
    // share a fixed port silently instead of failing to listen.
    set_socket_options([](socket_t sock) {
      int one = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      fcntl(sock, F_SETFD, FD_CLOEXEC);
    });
  }

  ~CppHttplibServer() override {
    Stop();
    if (wake_fd_ >= 0) close(wake_fd_);
  }

  bool Listen(const std::string& host, int port, std::string* error) override {
    if (wake_fd_ < 0) {
      *error = std::string("eventfd: ") + std::strerror(errno);
      return false;
    }
    errno = 0;
    bool ok;
    if (port == 0) {
      port_ = bind_to_any_port(host);
      ok = port_ > 0;
    } else {
      ok = bind_to_port(host, port);
      port_ = port;
    }
    if (!ok) {
      *error = errno != 0 ? std::strerror(errno) : "cannot listen";
      return false;
    }
    // httplib listens with a backlog of 5 (compiled into the library); a
    // second listen() on Linux only resizes the queue, so that a burst of
    // clients is queued rather than made to retry their SYN a second later.
    ::listen(svr_sock_, 128);
    return true;
  }

  int port() const override { return port_; }

  void Start(HttpServer::Handler handler) override {
    if (svr_sock_ == INVALID_SOCKET || thread_.joinable()) return;
    handler_ = std::move(handler);
    // Created on the accept thread, so the workers inherit its signal mask.
    new_task_queue = [] { return new WorkerPool(kWorkers, kMaxQueued); };
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
      thread_ = std::thread([this] {
        try {
          listen_after_bind();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "heapprof: the HTTP server stopped: %s\n", e.what());
        }
        listen_returned_.store(true);
      });
    } catch (...) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      throw;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void Stop() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      stopping_.store(true);
      sleep_cv_.notify_all();
    }
    uint64_t one = 1;
    if (wake_fd_ >= 0 && ::write(wake_fd_, &one, sizeof one) < 0) {
      // Only EAGAIN is possible (the counter is full): it is readable then.
    }
    if (thread_.joinable()) {
      // httplib's stop() does nothing until the accept loop has started.
      while (!is_running() && !listen_returned_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      stop();
      thread_.join();
    }
    socket_t s = svr_sock_.exchange(INVALID_SOCKET);
    if (s != INVALID_SOCKET) close(s);  // bound but never served
  }

  bool Sleep(int64_t seconds) override {
    std::unique_lock<std::mutex> lk(mu_);
    return !sleep_cv_.wait_for(lk, std::chrono::seconds(seconds),
                               [this] { return stopping_.load(); });
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    Connection c(sock, wake_fd_, &stopping_, t_accepted, t_reject);
    bool ok = false;
    if (t_reject) {
      c.SendPlain(503, "Service Unavailable", "heapprof: too many connections, try again\n");
    } else {
      switch (c.ReadHead()) {
        case Connection::Head::kComplete: {
          const Connection::Length length = c.CheckContentLength();
          if (length == Connection::Length::kBad) {
            c.SendPlain(400, "Bad Request", "heapprof: bad Content-Length\n");
            break;
          }
          if (length == Connection::Length::kTooLarge) {
            c.SendPlain(413, "Payload Too Large",
                        "heapprof: Content-Length over " + std::to_string(kMaxBody) + " bytes\n");
            break;
          }
          bool closed = false;
          ok = process_request(c, /*close_connection=*/true, closed, [&c](httplib::Request& req) {
            c.StartResponse();
            req.headers.erase("Accept-Encoding");  // http_server.h .no-compression
            req.ranges.clear();
          });
          break;
        }
        case Connection::Head::kUriTooLong:
          c.SendPlain(414, "URI Too Long",
                      "heapprof: request line over " + std::to_string(kMaxLine) + " bytes\n");
          break;
        case Connection::Head::kTooLarge:
          c.SendPlain(431, "Request Header Fields Too Large",
                      "heapprof: a header line over " + std::to_string(kMaxLine) +
                          " bytes or headers over " + std::to_string(kMaxHead) + " bytes\n");
          break;
        default:
          break;  // closed, too slow, or stopping: as Go, nothing to say
      }
    }
    c.Close();
    return ok;
  }

  void Respond(const httplib::Request& req, httplib::Response& res) {
    HttpReply reply;
    try {
      HttpRequest r;
      r.method = req.method;
      r.path = req.path;
      r.params = req.params;
      size_t q = req.target.find('?');
      if (q != std::string::npos) r.raw_query = req.target.substr(q + 1);
      r.body = req.body;
      reply = handler_(r);
    } catch (const std::exception& e) {
      reply = HttpReply();
      reply.status = 500;
      reply.content_type = kText;
      reply.body = std::string("heapprof: ") + e.what() + "\n";
    }
    res.status = reply.status;
    for (const auto& h : reply.headers) res.set_header(h.first, h.second);
    if (!reply.content_type.empty()) res.set_content(reply.body, reply.content_type);
  }

  const int wake_fd_;
  int port_ = 0;
  HttpServer::Handler handler_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> listen_returned_{false};
  std::mutex mu_;
  std::condition_variable sleep_cv_;
  std::thread thread_;
};

}  // namespace
}  // namespace heapprof

// The module's one entry point (http_server.h .module).
extern "C" __attribute__((visibility("default"))) heapprof::HttpServer* heapprof_new_http_server() {
  try {
    return new heapprof::CppHttplibServer();
  } catch (const std::exception&) {
    return nullptr;
  }
}
