// heapprof's HTTP server, on cpp-httplib (Debian's libcpp-httplib 0.11): the
// library parses requests, routes them and writes responses; http_server.cc
// adds what a server of agent threads inside a VM needs and the library does
// not do: per-request deadlines, a bounded pool, limits, prompt shutdown.
//
// Design:
// .module  A module of its own, libheapprof_http.so beside libheapprof.so, loaded
//     by LoadHttpServer only when http= is given: Debian's libcpp-httplib
//     links OpenSSL and brotli, and with minivm's RTLD_NOW their relocations
//     cost every VM start that loads heapprof about 4 ms of CPU
//     (docs/performance.md), a price only users of the endpoint should pay.
// .threads  Threads: httplib's accept loop on one thread, requests on a pool of
//     kWorkers (httplib's TaskQueue interface), all started with every
//     signal blocked, so that the program's signals never land on them.
//     Connections accepted while every worker is busy wait in a queue of at
//     most kMaxQueued; past that a connection gets 503 at once.
// .one-request  One request per connection (Connection: close): an idle keep-alive
//     connection would hold a worker.
// .deadlines  Deadlines. httplib's timeouts bound each recv and send, so a client
//     sending one byte every 2 s would hold a worker for ever. Each
//     connection's I/O goes through a Stream of ours instead (by overriding
//     Server::process_and_close_socket, as httplib's SSLServer does): the
//     request line, headers and any body must arrive within kReadTimeout of
//     the accept, and the response must be written within kWriteTimeout of
//     the end of the headers (Go's http.Server WriteTimeout, which also
//     bounds ?seconds=N), never waiting more than kWriteStall for the client
//     to take more bytes.
// .limits  Limits, checked as the request head arrives, before httplib sees it: a
//     request line over kMaxLine gets 414, a header line over kMaxLine or a
//     head over kMaxHead gets 431. Then, still before any body is read, the
//     Content-Length headers, by Go's net/http's rules: several that differ,
//     or one that is not a decimal number below 2^63 (`-5`), get 400; one
//     over kMaxBody gets 413. httplib cannot do this itself: it reads (or
//     skips) the body before any hook of its own runs, and takes only the
//     first of several Content-Length headers.
// .stop  Stop() is prompt whatever the clients do: every socket wait also polls
//     an eventfd that Stop() makes readable, a stopping server never waits
//     to write, and handlers in Sleep() wake up.
// .no-compression  Responses are never compressed (the client's Accept-Encoding is
//     dropped) and Range is ignored, as by Go's net/http/pprof; HEAD gets
//     GET's headers (httplib's extra Accept-Ranges for HEAD is removed).
// Rejected: an event loop reading all request heads on one thread (slow
// clients would then cost no worker at all): more code than the deadlines,
// for a debugging endpoint on 127.0.0.1 where kWorkers slow clients delay
// others by kReadTimeout at most.
#ifndef MINIVM_EXAMPLES_AGENTS_HEAPPROF_HTTP_SERVER_H_
#define MINIVM_EXAMPLES_AGENTS_HEAPPROF_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "pprof_http.h"

namespace heapprof {

class HttpServer {
 public:
  static constexpr int kWorkers = 4;
  static constexpr int kMaxQueued = 64;
  static constexpr int kReadTimeoutSeconds = 5;
  static constexpr int kWriteTimeoutSeconds = 300;
  static constexpr int kWriteStallSeconds = 10;
  static constexpr size_t kMaxLine = 8192;       // bytes, CRLF included (httplib's limit)
  static constexpr size_t kMaxHead = 64 * 1024;  // request line + headers
  static constexpr size_t kMaxBody = 1 << 20;    // POST /debug/pprof/symbol

  using Handler = std::function<HttpReply(const HttpRequest&)>;

  virtual ~HttpServer() = default;
  // Binds host:port (a numeric IPv4 or IPv6 address; port 0: a free one)
  // and listens. False with *error set.
  virtual bool Listen(const std::string& host, int port, std::string* error) = 0;
  virtual int port() const = 0;
  // Serves with `handler` on new threads until Stop().
  virtual void Start(Handler handler) = 0;
  // Stops serving and joins every thread, within milliseconds whatever the
  // clients do (a handler already computing finishes first). Idempotent.
  virtual void Stop() = 0;
  // For handlers: waits `seconds`, or until Stop(); false in the latter case.
  virtual bool Sleep(int64_t seconds) = 0;
};

// Loads libheapprof_http.so from the folder of the library this code is in
// (.module) and makes a server; null with *error set on failure.
std::unique_ptr<HttpServer> LoadHttpServer(std::string* error);

// What libheapprof_http.so exports: a new server (null if out of memory).
using NewHttpServerFn = HttpServer* (*)();
constexpr const char* kNewHttpServerSymbol = "heapprof_new_http_server";

}  // namespace heapprof

#endif  // MINIVM_EXAMPLES_AGENTS_HEAPPROF_HTTP_SERVER_H_
