#include "pprof_http.h"

#include <cmath>
#include <string>

#include "../common/output.h"
#include "heap_text.h"

namespace heapprof {
namespace {

constexpr const char* kText = "text/plain; charset=utf-8";

HttpReply Reply(int status, const char* content_type, std::string body) {
  HttpReply r;
  r.status = status;
  r.content_type = content_type;
  r.body = std::move(body);
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

// Go's serveError.
HttpReply Error(int status, const std::string& message) {
  HttpReply r = Reply(status, kText, message + "\n");
  r.headers.emplace_back("X-Go-Pprof", "1");
  return r;
}

HttpReply NotAllowed(const char* allow) {
  HttpReply r = Error(405, "method not allowed");
  r.headers.emplace_back("Allow", allow);
  return r;
}

HttpReply Redirect(int status, std::string location) {
  HttpReply r = Reply(status, kText, "");
  r.content_type.clear();  // Go sends no body for a HEAD-able redirect either
  r.headers.emplace_back("Location", std::move(location));
  return r;
}

// Go's r.FormValue: the first value, "" if absent.
std::string FormValue(const std::multimap<std::string, std::string>& params, const char* name) {
  auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

// "", "0" or "1". False for anything else.
bool ParseFlag(const std::string& v, bool* out) {
  if (v.empty() || v == "0") {
    *out = false;
    return true;
  }
  if (v == "1") {
    *out = true;
    return true;
  }
  return false;
}

// A positive decimal integer (an optional '+', as Go's strconv.ParseInt).
bool ParsePositive(const std::string& v, int64_t* out) {
  size_t i = !v.empty() && v[0] == '+' ? 1 : 0;
  if (i == v.size() || v.size() - i > 18) return false;
  int64_t n = 0;
  for (; i < v.size(); i++) {
    if (v[i] < '0' || v[i] > '9') return false;
    n = n * 10 + (v[i] - '0');
  }
  *out = n;
  return n > 0;
}

// Rows that appear in the pprof profile (allocated something).
int64_t CountSamples(const std::vector<Row>& rows) {
  int64_t n = 0;
  for (const Row& r : rows) {
    if (std::llround(r.totals.alloc_objects) > 0 || std::llround(r.totals.alloc_bytes) > 0) n++;
  }
  return n;
}

}  // namespace

PprofHandler::PprofHandler(ProfileSource source, std::function<bool(int64_t)> sleep,
                           int64_t write_timeout_seconds)
    : source_(std::move(source)),
      sleep_(std::move(sleep)),
      write_timeout_seconds_(write_timeout_seconds) {}

HttpReply PprofHandler::Handle(const HttpRequest& request) const {
  const std::string& p = request.path;
  // Go's ServeMux sends "/debug/pprof" to the subtree's page, query kept, so
  // that the index's relative links work; "/" is a convenience of ours.
  if (p == "/debug/pprof") {
    return Redirect(301,
                    "/debug/pprof/" + (request.raw_query.empty() ? "" : "?" + request.raw_query));
  }
  if (p == "/") return Redirect(302, "/debug/pprof/");
  bool get = request.method == "GET" || request.method == "HEAD";
  if (p == "/debug/pprof/") return get ? Index() : NotAllowed("GET, HEAD");
  if (p == "/debug/pprof/heap" || p == "/debug/pprof/allocs") {
    if (!get) return NotAllowed("GET, HEAD");
    return Profile(request, p == "/debug/pprof/heap" ? ProfileKind::kHeap : ProfileKind::kAllocs);
  }
  if (p == "/debug/pprof/symbol") {
    if (!get && request.method != "POST") return NotAllowed("GET, HEAD, POST");
    return Symbol(request);
  }
  if (p.compare(0, 13, "/debug/pprof/") == 0) return Error(404, "Unknown profile");
  return Error(404, "404 page not found");
}

HttpReply PprofHandler::Index() const {
  std::vector<Row> rows;
  agent::SiteTable::Snapshot sites;
  source_.snapshot(&rows, &sites);
  std::string count = std::to_string(CountSamples(rows));
  auto row = [&count](const char* name) {
    return "<tr><td>" + count + "</td><td><a href='" + name + "?debug=1'>" + name +
           "</a></td></tr>\n";
  };
  // Go's index page (net/http/pprof indexTmplExecute), with our two
  // profiles and links to every form.
  std::string b =
      "<html>\n<head>\n<title>/debug/pprof/</title>\n<style>\n.profile-name{\n"
      "\tdisplay:inline-block;\n\twidth:6rem;\n}\n</style>\n</head>\n<body>\n"
      "/debug/pprof/ &mdash; minivm heapprof, sampling interval " +
      std::to_string(source_.interval()) +
      " bytes<br>\n<br>\nTypes of profiles available:\n<table>\n"
      "<thead><td>Count</td><td>Profile</td></thead>\n" +
      row("allocs") + row("heap") +
      "</table>\n<p>\nProfile Descriptions:\n<ul>\n"
      "<li><div class=profile-name>allocs: </div> A sampling of all past memory allocations "
      "(<a href='allocs'>pprof</a>, <a href='allocs?debug=1'>text</a>)</li>\n"
      "<li><div class=profile-name>heap: </div> A sampling of memory allocations of live "
      "objects, as of the last collection. You can specify the gc GET parameter to run a full "
      "collection before taking the heap sample "
      "(<a href='heap'>pprof</a>, <a href='heap?debug=1'>text</a>, "
      "<a href='heap?gc=1&amp;debug=1'>text after a collection</a>)</li>\n"
      "</ul>\n</p>\n<p>\n"
      "Count: the samples (one per allocating stack, class and thread) in each profile. "
      "The seconds GET parameter gives the change over that many seconds instead "
      "(<code>go tool pprof -seconds=N URL</code>).\n"
      "</p>\n</body>\n</html>\n";
  return Reply(200, "text/html; charset=utf-8", std::move(b));
}

HttpReply PprofHandler::Profile(const HttpRequest& request, ProfileKind kind) const {
  const char* name = kind == ProfileKind::kHeap ? "heap" : "allocs";
  const std::string path = std::string("/debug/pprof/") + name;
  bool gc = false, debug = false;
  int64_t seconds = 0;
  std::string sec = FormValue(request.params, "seconds");
  if (!sec.empty() && !ParsePositive(sec, &seconds)) {
    return Error(400, "invalid value for \"seconds\" - must be a positive integer");
  }
  if (!ParseFlag(FormValue(request.params, "gc"), &gc)) {
    return Error(400, "invalid value for \"gc\" - must be 0 or 1");
  }
  if (!ParseFlag(FormValue(request.params, "debug"), &debug)) {
    return Error(400, "invalid value for \"debug\" - must be 0 or 1");
  }
  if (seconds > 0 && seconds >= write_timeout_seconds_) {
    return Error(400, "profile duration exceeds server's WriteTimeout (" +
                          std::to_string(write_timeout_seconds_) + " s)");
  }
  if (seconds > 0 && debug) return Error(400, "seconds and debug params are incompatible");
  if (gc && !source_.collect()) {
    return Error(503, "heapprof: the VM did not run the collection (is it exiting?)");
  }
  std::vector<Row> rows;
  agent::SiteTable::Snapshot sites;
  source_.snapshot(&rows, &sites);
  HttpReply r;
  if (seconds > 0) {
    // Go's serveDeltaProfile: a profile now, one N seconds later, and their
    // difference, timed at the second with the window as its duration. With
    // gc=1 (ignored by Go here) each of the two follows a collection, so
    // that in-use values compare two collected heaps.
    DeltaWindow window;
    window.start_nanos = agent::WallNanos();
    if (!sleep_(seconds)) return Error(503, "heapprof: the VM is exiting");
    if (gc && !source_.collect()) {
      return Error(503, "heapprof: the VM did not run the collection (is it exiting?)");
    }
    std::vector<Row> now;
    source_.snapshot(&now, &sites);
    window.end_nanos = agent::WallNanos();
    r = Reply(200, "application/octet-stream",
              BuildDeltaPprof(SubtractRows(now, rows), sites, source_.interval(), kind, window,
                              Comments(path + "?seconds=" + std::to_string(seconds) +
                                           ": what changed in that many seconds",
                                       gc),
                              source_.main_binary));
    r.headers.emplace_back("Content-Disposition",
                           std::string("attachment; filename=\"") + name + "-delta\"");
  } else if (debug) {
    return Reply(200, kText,
                 BuildLegacyText(rows, sites, source_.interval(), kind, Comments(path, gc)));
  } else {
    r = Reply(
        200, "application/octet-stream",
        BuildPprof(rows, sites, source_.interval(), kind, Comments(path, gc), source_.main_binary));
    r.headers.emplace_back("Content-Disposition",
                           std::string("attachment; filename=\"") + name + "\"");
  }
  if (r.body.empty()) return Error(500, "heapprof: could not encode the profile");
  return r;
}

std::vector<std::string> PprofHandler::Comments(const std::string& what, bool collected) const {
  return source_.comments ? source_.comments(what, collected) : std::vector<std::string>();
}

HttpReply PprofHandler::Symbol(const HttpRequest& request) const {
  agent::SiteTable::Snapshot sites;
  source_.snapshot(nullptr, &sites);
  // Go's handler: addresses in the body of a POST, else in the raw query.
  const std::string& query = request.method == "POST" ? request.body : request.raw_query;
  return Reply(200, kText, LookupSymbols(query, sites));
}

}  // namespace heapprof
