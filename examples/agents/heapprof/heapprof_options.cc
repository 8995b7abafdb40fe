// heapprof's options: the declarations, and the parsing of http='s address.
#include "heapprof_options.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cctype>
#include <cstdint>
#include <string>

#include "../common/thread_filter.h"

namespace heapprof {
namespace {

// "PORT", "ADDR:PORT" or "[IPV6]:PORT", ADDR numeric.
bool ParseHttpAddress(const std::string& v, std::string* host, int64_t* port) {
  size_t colon = v.rfind(':');
  if (colon == std::string::npos) return agent::ParseInt(v, 0, 65535, port);
  std::string h = v.substr(0, colon);
  // Go users write localhost:6060 (net/http/pprof's habit): the loopback,
  // without a resolver lookup that /etc/hosts could point elsewhere.
  if (h == "localhost") h = "127.0.0.1";
  unsigned char addr[sizeof(struct in6_addr)];
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
    if (inet_pton(AF_INET6, h.c_str(), addr) != 1) return false;
  } else if (inet_pton(AF_INET, h.c_str(), addr) != 1) {
    return false;  // (an IPv6 address must be in brackets)
  }
  *host = h;
  return agent::ParseInt(v.substr(colon + 1), 0, 65535, port);
}

}  // namespace

void DeclareOptions(Config* c, agent::OptionParser* p) {
  p->Interval(&c->interval);
  p->Text("name", &c->name, "a name of letters, digits, '-', '_' and '.'",
          [](const std::string& v) {
            for (unsigned char ch : v) {
              if (!std::isalnum(ch) && ch != '-' && ch != '_' && ch != '.') {
                return "want a name of letters, digits, '-', '_' and '.'";
              }
            }
            return "";
          });
  p->Custom(
      "file", "a file path (empty: no final profile)",
      [c](const std::string& v) {
        c->file = v;
        c->file_given = true;
        return true;
      },
      /*empty_ok=*/true);
  p->Choice<bool>("format", &c->collapsed, {{"pprof", false}, {"collapsed", true}});
  p->Choice<bool>("space", &c->collapsed_inuse, {{"inuse", true}, {"alloc", false}});
  p->Bytes("dump_every", &c->dump_every, 1, INT64_MAX, "64m");
  p->Text("control", &c->control, "a file path");
  p->Custom("http",
            "PORT or ADDR:PORT with a numeric address or localhost (127.0.0.1 if omitted; "
            "[::1]:PORT for IPv6), port 0 for any free one",
            [c](const std::string& v) {
              c->http_option = v;
              return ParseHttpAddress(v, &c->http_host, &c->http_port);
            });
  p->Depth(&c->depth);
  agent::DeclareThreadsOption(p, &c->threads);
  p->Int("top", &c->top, 0, 1000, "a site count");
  p->Choice<bool>("gc", &c->gc, {{"1", true}, {"0", false}});
  p->Double("gdump", &c->gdump, 1e-6, 1e6, "a growth fraction > 0, e.g. 0.1");
  p->Custom("histo", "a number of classes, or all", [c](const std::string& v) {
    if (v != "all") return agent::ParseInt(v, 0, 1000000, &c->histo);
    c->histo = -1;
    return true;
  });
  p->Int("retained", &c->retained, 0, 1000, "a number of sites");
  p->Int("path_objects", &c->path_budget.max_objects, 1, INT32_MAX, "a number of objects");
  p->Double("path_seconds", &c->path_budget.max_seconds, 0.001, 3600,
            "seconds from 0.001 to 3600, e.g. 2");
}

}  // namespace heapprof
