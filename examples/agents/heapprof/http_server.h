// A minimal HTTP/1.1 server on 127.0.0.1 for heapprof's live profiles, run on
// one agent-owned thread (plain POSIX sockets, one request per connection,
// `Connection: close`). It is enough for `go tool pprof URL`, curl and
// browsers; it is not a general web server: GET only, no keep-alive, no
// chunked bodies, requests up to 8 KiB, 5 s socket timeouts.
#ifndef MINIVM_EXAMPLES_AGENTS_HEAPPROF_HTTP_SERVER_H_
#define MINIVM_EXAMPLES_AGENTS_HEAPPROF_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace heapprof {

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/octet-stream";
  std::string extra_headers;  // each line ending in \r\n
  std::string body;
};

class HttpServer {
 public:
  // path (without the query) and query (after '?', possibly empty).
  using Handler = std::function<HttpResponse(const std::string& path, const std::string& query)>;

  ~HttpServer();
  // Binds 127.0.0.1:port (0: a free port) and listens. False with *error set.
  bool Listen(int port, std::string* error);
  int port() const { return port_; }
  // Serves on a new thread until Stop().
  void Start(Handler handler);
  void Stop();

 private:
  void Run();
  void Serve(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace heapprof

#endif  // MINIVM_EXAMPLES_AGENTS_HEAPPROF_HTTP_SERVER_H_
