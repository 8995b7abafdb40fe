// heapprof's HTTP endpoints, as Go's net/http/pprof serves a Go heap:
// routing, query parsing and the profile forms, independent of the server
// that carries them (http_server.h) and of the profiler, which it reaches
// only through ProfileSource. Pure enough to be checked without sockets
// (tests/tools/unit_checks.cc).
//
//   /debug/pprof/              HTML index: profiles, sample counts, links
//   /debug/pprof/heap          pprof protobuf (gzipped), default inuse_space
//   /debug/pprof/allocs        the same data, default alloc_space
//       ?gc=1                  run a full collection first
//       ?seconds=N             a delta: what changed during the next N s
//       ?debug=1               Go's legacy text (heap_text.h)
//   /debug/pprof/symbol        names for the legacy text's addresses
//   /debug/pprof, /            redirect to /debug/pprof/
//
// Errors as Go's serveError: text/plain, the header X-Go-Pprof: 1 (which
// makes `go tool pprof` print the message), the message and a newline.
// Query values: gc and debug are 0 or 1, seconds a positive integer below
// the server's write timeout; an empty value counts as absent, the first of
// repeated parameters wins and unknown ones are ignored (Go's FormValue);
// anything else is a 400 naming the parameter.
#ifndef MINIVM_EXAMPLES_AGENTS_HEAPPROF_PPROF_HTTP_H_
#define MINIVM_EXAMPLES_AGENTS_HEAPPROF_PPROF_HTTP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../common/sites.h"
#include "heap_profile.h"

namespace heapprof {

struct HttpRequest {
  std::string method;                              // "GET", "HEAD", "POST", ...
  std::string path;                                // percent-decoded, without the query
  std::multimap<std::string, std::string> params;  // decoded query parameters
  std::string raw_query;                           // after '?', as sent
  std::string body;
};

struct HttpReply {
  int status = 200;
  std::string content_type;  // empty only with an empty body
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// What the endpoints need from the profiler. Every member is called from
// the server's worker threads, possibly several at once.
struct ProfileSource {
  // Copies the rows (unless null), then the site table (in that order, so
  // that the sites cover every id the rows use).
  std::function<void(std::vector<Row>*, agent::SiteTable::Snapshot*)> snapshot;
  // Runs a full collection; returns once its ObjectFree events are in the
  // rows. False if the VM refused (then nothing was collected).
  std::function<bool()> collect;
  // The current sampling interval, bytes.
  std::function<int64_t()> interval;
  // A profile's comments (`go tool pprof -comments`): `what` it is, for
  // which program, and how live its in-use values are (`collected`: a
  // collection was forced for it). May be empty.
  std::function<std::vector<std::string>(const std::string& what, bool collected)> comments;
  // The name of the profile's main mapping (pprof's "File:").
  std::string main_binary = "minivm";
};

class PprofHandler {
 public:
  // `sleep(seconds)` waits, or returns false early if the server is
  // stopping. `write_timeout_seconds`: the server's limit on a request's
  // handling (Go's http.Server WriteTimeout); delta profiles must be shorter.
  PprofHandler(ProfileSource source, std::function<bool(int64_t)> sleep,
               int64_t write_timeout_seconds);

  HttpReply Handle(const HttpRequest& request) const;

 private:
  HttpReply Index() const;
  HttpReply Profile(const HttpRequest& request, ProfileKind kind) const;
  HttpReply Symbol(const HttpRequest& request) const;
  std::vector<std::string> Comments(const std::string& what, bool collected) const;

  ProfileSource source_;
  std::function<bool(int64_t)> sleep_;
  int64_t write_timeout_seconds_;
};

}  // namespace heapprof

#endif  // MINIVM_EXAMPLES_AGENTS_HEAPPROF_PPROF_HTTP_H_
