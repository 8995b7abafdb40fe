// Checks of the tool agents' pure parts, without a VM: option parsing, file
// numbering, the protobuf wire encoding, gzip, per-site aggregation, the
// collapsed-stack writer, and heapprof's HTTP endpoints without sockets
// (delta profiles, legacy text, symbols, routing and query checks). Prints one line per failed
// check and, last, "unit_checks: N passed, M failed"; exit code 1 on any failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../../examples/agents/common/options.h"
#include "../../examples/agents/common/output.h"
#include "../../examples/agents/common/pprof.h"
#include "../../examples/agents/heapprof/heap_profile.h"
#include "../../examples/agents/heapprof/heap_text.h"
#include "../../examples/agents/heapprof/pprof_http.h"

namespace {
int passed = 0, failed = 0;
#define CHECK(cond)                                               \
  do {                                                            \
    if (cond) {                                                   \
      passed++;                                                   \
    } else {                                                      \
      failed++;                                                   \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                             \
  } while (0)

std::string Hex(const std::string& s) {
  std::string out;
  char b[4];
  for (unsigned char c : s) {
    std::snprintf(b, sizeof b, "%02x", c);
    out += b;
  }
  return out;
}

void Options() {
  agent::OptionList l;
  std::string bad;
  CHECK(agent::SplitOptions(nullptr, &l, &bad) && l.empty());
  CHECK(agent::SplitOptions("", &l, &bad) && l.empty());
  CHECK(agent::SplitOptions("a=1,b=x=y,c", &l, &bad) && l.size() == 3 && l[1].second == "x=y" &&
        l[2].first == "c" && l[2].second.empty());
  CHECK(!agent::SplitOptions("a=1,a=2", &l, &bad) && bad == "a=2");
  CHECK(!agent::SplitOptions("a=1,,b=2", &l, &bad));
  CHECK(!agent::SplitOptions("=3", &l, &bad) && bad == "=3");
  int64_t v = 0;
  CHECK(agent::ParseBytes("512k", 0, 1 << 30, &v) && v == 524288);
  CHECK(agent::ParseBytes("4096", 0, 1 << 30, &v) && v == 4096);
  CHECK(agent::ParseBytes("1M", 0, 1 << 30, &v) && v == 1048576);
  CHECK(!agent::ParseBytes("-1", 0, 1 << 30, &v));
  CHECK(!agent::ParseBytes("k", 0, 1 << 30, &v));
  CHECK(!agent::ParseBytes("12x", 0, 1 << 30, &v));
  CHECK(!agent::ParseBytes("4g", 0, 0x7fffffff, &v));
  CHECK(!agent::ParseBytes("99999999999999999999", 0, INT64_MAX, &v));
  CHECK(agent::ParseInt("0", 0, 65535, &v) && v == 0);
  CHECK(!agent::ParseInt("65536", 0, 65535, &v));
  CHECK(!agent::ParseInt("", 0, 65535, &v));
  double d = 0;
  CHECK(agent::ParseDouble("0.999", 0.5, 1, &d) && d == 0.999);
  CHECK(!agent::ParseDouble("nan", 0.5, 1, &d));
  std::vector<std::string> names;
  CHECK(agent::SplitNames("main+thread-2", '+', &names) && names.size() == 2 &&
        names[1] == "thread-2");
  CHECK(!agent::SplitNames("main++x", '+', &names));
  CHECK(!agent::SplitNames("", '+', &names));
}

// The one parser's declarations: defaults kept, values stored, and each
// kind of mistake in its one wording (docs/tools.md lists them).
void OptionParserChecks() {
  int64_t bytes = 7, count = 3;
  double fraction = 0.5;
  bool flag = true;
  std::string text = "default", custom;
  agent::OptionParser p("demo");
  p.Bytes("size", &bytes, 0, 1 << 20, "4096");
  p.Int("count", &count, 1, 10, "a count");
  p.Double("fraction", &fraction, 0.1, 0.9, "a fraction, e.g. 0.5");
  p.Choice<bool>("flag", &flag, {{"on", true}, {"off", false}});
  p.Text("text", &text, "some text");
  p.Custom("custom", "x or y", [&custom](const std::string& v) {
    custom = v;
    return v == "x" || v == "y";
  });
  std::string error;
  CHECK(p.Parse(nullptr, &error) && bytes == 7 && count == 3 && text == "default");
  CHECK(p.Parse("size=4k,count=10,fraction=0.25,flag=off,text=a=b,custom=y", &error) &&
        bytes == 4096 && count == 10 && fraction == 0.25 && !flag && text == "a=b" &&
        custom == "y");
  CHECK(!p.Parse("count=11", &error) &&
        error == "demo: bad option 'count=11': want a count from 1 to 10");
  CHECK(!p.Parse("size=2m", &error) &&
        error == "demo: bad option 'size=2m': want bytes from 0 to 1m, e.g. 4096");
  CHECK(!p.Parse("flag=maybe", &error) && error == "demo: bad option 'flag=maybe': want on or off");
  CHECK(!p.Parse("custom=z", &error) && error == "demo: bad option 'custom=z': want x or y");
  CHECK(!p.Parse("text", &error) &&
        error == "demo: bad option 'text': missing value (want some text)");
  CHECK(!p.Parse("count=2,count=3", &error) &&
        error == "demo: bad option 'count=3': count is given twice");
  CHECK(!p.Parse("count=2,,size=1", &error) &&
        error == "demo: bad option '': want key=value options separated by commas");
  CHECK(!p.Parse("colour=red", &error) &&
        error == "demo: bad option 'colour=red': unknown option (known: size, count, fraction, "
                 "flag, text, custom)");
  agent::OptionParser q("needy");
  std::string socket;
  q.Text("socket", &socket, "a path");
  q.Require("socket", "socket=PATH");
  CHECK(!q.Parse("", &error) && error == "needy: missing option socket=PATH");
  CHECK(q.Parse("socket=/s", &error) && socket == "/s");
}

void Paths() {
  CHECK(agent::NumberedPath("heap.pb.gz", 1) == "heap.0001.pb.gz");
  CHECK(agent::NumberedPath("dir.x/out.folded", 12) == "dir.x/out.0012.folded");
  CHECK(agent::NumberedPath("dir.x/out", 3) == "dir.x/out.0003");
  CHECK(agent::HumanBytes(512) == "512 B");
  CHECK(agent::HumanBytes(1536) == "1.5 KiB");
}

void Proto() {
  pprof::ProtoWriter w;
  w.Varint(300);
  CHECK(Hex(w.data()) == "ac02");
  w.Clear();
  w.Uint64(1, 150);
  CHECK(Hex(w.data()) == "089601");
  w.Clear();
  w.Bytes(2, "testing");
  CHECK(Hex(w.data()) == "120774657374696e67");
  w.Clear();
  w.PackedInt64(4, {3, 270, 86942});
  CHECK(Hex(w.data()) == "2206038e029ea705");
  w.Clear();
  w.Int64(1, -1);  // int64 negatives take ten bytes
  CHECK(Hex(w.data()) == "08ffffffffffffffffff01");

  pprof::ProfileBuilder b;
  b.AddSampleType("alloc_space", "bytes");
  uint64_t l1 = b.Location("f", "a.mv", 3);
  uint64_t l2 = b.Location("f", "a.mv", 4);
  uint64_t l3 = b.Location("f", "a.mv", 3);
  CHECK(l1 == 1 && l2 == 2 && l3 == 1);
  b.AddSample({l1}, {42}, {});
  std::string enc = b.Encode();
  CHECK(!enc.empty());
  std::string gz, back;
  CHECK(pprof::Gzip(enc, &gz) && gz.size() > 10 && static_cast<unsigned char>(gz[0]) == 0x1f &&
        static_cast<unsigned char>(gz[1]) == 0x8b);
  CHECK(pprof::Gunzip(gz, &back) && back == enc);
  std::string big(1 << 20, 'x'), gzbig, bigback;
  CHECK(pprof::Gzip(big, &gzbig) && gzbig.size() < 10000 && pprof::Gunzip(gzbig, &bigback) &&
        bigback == big);
}

void Aggregation() {
  agent::SiteTable sites;
  uint32_t cls = sites.InternString("Node");
  uint32_t thr = sites.InternString("main");
  heapprof::HeapData data;
  heapprof::SiteKey k{0, cls, thr};
  // interval-0 style: weight == size
  CHECK(data.RecordAlloc(1, k, 32, 32) == 32);
  data.RecordAlloc(2, k, 0.1 + 0.2, 32);  // awkward doubles
  data.RecordAlloc(0, k, 64, 32);         // untagged: allocated, never in use
  data.RecordFree(1);
  data.RecordFree(1);  // twice: ignored
  data.RecordFree(99);
  std::vector<heapprof::Row> rows;
  data.Copy(&rows);
  CHECK(rows.size() == 1);
  CHECK(std::fabs(rows[0].totals.alloc_bytes - 96.3) < 1e-9);
  CHECK(rows[0].totals.live_samples == 1 && rows[0].totals.samples == 3);
  data.RecordFree(2);
  data.Copy(&rows);
  CHECK(rows[0].totals.inuse_bytes == 0.0 && rows[0].totals.inuse_objects == 0.0);
  agent::SiteTable::Snapshot snap;
  sites.Copy(&snap);
  CHECK(heapprof::BuildCollapsed(rows, snap, false) == "<unknown>;[Node] 96\n");
  CHECK(heapprof::BuildCollapsed(rows, snap, true).empty());
  std::string gz = heapprof::BuildPprof(rows, snap, 0, heapprof::ProfileKind::kHeap);
  std::string raw;
  CHECK(pprof::Gunzip(gz, &raw) && raw.find("inuse_space") != std::string::npos);
}

// ---- heapprof's HTTP endpoints (pprof_http.h, heap_text.h) ----------------

std::string Varint(uint64_t v) {
  pprof::ProtoWriter w;
  w.Varint(v);
  return w.data();
}

// Two frames f (a.mv:3) <- main (a.mv:9), class Node, thread main.
struct TinyProfile {
  agent::SiteTable table;
  agent::SiteTable::Snapshot sites;
  heapprof::SiteKey key{}, other{};
  TinyProfile() {
    uint32_t cls = table.InternString("Node");
    uint32_t thr = table.InternString("main");
    table.Copy(&sites);
    sites.frames.push_back({"f", "a.mv", 3});     // frame 1
    sites.frames.push_back({"main", "a.mv", 9});  // frame 2
    sites.stacks.push_back({1, 2});               // stack 1
    sites.stacks.push_back({2});                  // stack 2
    key = heapprof::SiteKey{1, cls, thr};
    other = heapprof::SiteKey{2, cls, thr};
  }
};

heapprof::Row MakeRow(heapprof::SiteKey k, double ao, double ab, double io, double ib) {
  heapprof::Row r{k, heapprof::Totals()};
  r.totals.alloc_objects = ao;
  r.totals.alloc_bytes = ab;
  r.totals.inuse_objects = io;
  r.totals.inuse_bytes = ib;
  r.totals.samples = 1;
  return r;
}

void DeltaProfiles() {
  TinyProfile t;
  std::vector<heapprof::Row> base = {MakeRow(t.key, 10, 1000, 8, 800)};
  std::vector<heapprof::Row> now = {MakeRow(t.key, 15, 1500, 2, 200),
                                    MakeRow(t.other, 1, 64, 1, 64)};
  std::vector<heapprof::Row> d = heapprof::SubtractRows(now, base);
  CHECK(d.size() == 2 && d[0].key == t.key && d[0].totals.alloc_objects == 5 &&
        d[0].totals.alloc_bytes == 500 && d[0].totals.inuse_objects == -6 &&
        d[0].totals.inuse_bytes == -600 && d[0].totals.samples == 0);
  CHECK(d[1].key == t.other && d[1].totals.alloc_bytes == 64);  // new since base: as is
  // A key only in base (never happens with HeapData) comes back negated.
  std::vector<heapprof::Row> gone = heapprof::SubtractRows({}, base);
  CHECK(gone.size() == 1 && gone[0].totals.alloc_bytes == -1000);
  CHECK(heapprof::SubtractRows(base, base)[0].totals.inuse_bytes == 0);

  heapprof::DeltaWindow w;
  w.start_nanos = 1000;
  w.end_nanos = 1000 + 2000000000;
  std::string raw;
  CHECK(pprof::Gunzip(
      heapprof::BuildDeltaPprof(d, t.sites, 4096, heapprof::ProfileKind::kAllocs, w), &raw));
  CHECK(raw.find("\x48" + Varint(w.end_nanos)) != std::string::npos);  // time_nanos (9)
  CHECK(raw.find("\x50" + Varint(2000000000)) != std::string::npos);   // duration_nanos (10)
  // The negative in-use values survive (int64 -600: ten bytes).
  CHECK(raw.find(Varint(static_cast<uint64_t>(int64_t{-600}))) != std::string::npos);
  CHECK(raw.find("alloc_space") != std::string::npos);
  // A delta with nothing changed has no sample at all (pprof's Merge drops
  // all-zero samples): the function names are not even in the string table.
  CHECK(pprof::Gunzip(heapprof::BuildDeltaPprof(heapprof::SubtractRows(base, base), t.sites, 4096,
                                                heapprof::ProfileKind::kHeap, w),
                      &raw) &&
        raw.find("main") == std::string::npos);
}

void LegacyText() {
  TinyProfile t;
  CHECK(heapprof::FrameAddress(0) == 0x100008 && heapprof::FrameAddress(2) == 0x100028);
  uint32_t f = 99;
  CHECK(heapprof::FrameOfAddress(0x100027, 3, &f) && f == 2);  // pprof asks for address - 1
  CHECK(heapprof::FrameOfAddress(0x100020, 3, &f) && f == 2);
  CHECK(heapprof::FrameOfAddress(0x10002f, 3, &f) && f == 2);
  CHECK(!heapprof::FrameOfAddress(0x100030, 3, &f));  // frame 3 does not exist
  CHECK(!heapprof::FrameOfAddress(0xfffff, 3, &f));

  std::vector<heapprof::Row> rows = {MakeRow(t.other, 2, 100, 0.4, 20),  // residue: 0 objects
                                     MakeRow(t.key, 4, 400.4, 3, 299.6),
                                     MakeRow(t.key, 0.2, 0.3, 0, 0)};  // rounds to nothing
  std::string heap = heapprof::BuildLegacyText(rows, t.sites, 4096, heapprof::ProfileKind::kHeap);
  // Totals are the sums of the lines; lines by in-use bytes.
  const std::string head = "heap profile: 4: 320 [6: 500] @ heapprofile\n# minivm";
  CHECK(heap.compare(0, head.size(), head) == 0);
  CHECK(heap.find("sampling interval 4096 bytes") != std::string::npos);
  size_t a = heap.find(
      "\n3: 300 [4: 400] @ 0x100018 0x100028\n"
      "#\t0x100018\tf\ta.mv:3\n#\t0x100028\tmain\ta.mv:9\n"
      "#\tclass Node, thread main\n");
  size_t b = heap.find("\n1: 20 [2: 100] @ 0x100028\n");  // 0 objects with 20 bytes: 1
  CHECK(a != std::string::npos && b != std::string::npos && a < b);
  CHECK(heap.find("\n0: 0 [0: 0]") == std::string::npos);
  std::string allocs =
      heapprof::BuildLegacyText(rows, t.sites, 4096, heapprof::ProfileKind::kAllocs);
  CHECK(allocs.find("\n3: 300 [4: 400]") < allocs.find("\n1: 20 [2: 100]"));

  CHECK(heapprof::LookupSymbols("", t.sites) == "num_symbols: 1\n");
  CHECK(heapprof::LookupSymbols(
            "0x100017+0x100027+junk+0x1++1048615+0x100037+-1+" + std::string(30, '9'), t.sites) ==
        "num_symbols: 1\n0x100017 f\n0x100027 main\n0x100027 main\n");
}

struct FakeSource {
  int collections = 0;
  bool collect_ok = true;
  std::vector<int64_t> sleeps;
  TinyProfile t;
  std::vector<heapprof::Row> rows;
  heapprof::PprofHandler Handler() {
    heapprof::ProfileSource s;
    s.snapshot = [this](std::vector<heapprof::Row>* r, agent::SiteTable::Snapshot* sites) {
      if (r != nullptr) *r = rows;
      *sites = t.sites;
    };
    s.collect = [this] {
      collections++;
      if (collect_ok) rows[0].totals.inuse_bytes = rows[0].totals.inuse_objects = 0;
      return collect_ok;
    };
    s.interval = [] { return int64_t{4096}; };
    return heapprof::PprofHandler(
        s,
        [this](int64_t seconds) {
          sleeps.push_back(seconds);
          rows[0].totals.alloc_bytes += 1000;  // what happens while the delta waits
          return seconds != 13;                // 13: the server stops meanwhile
        },
        300);
  }
};

heapprof::HttpReply Get(const heapprof::PprofHandler& h, const std::string& target,
                        const std::string& method = "GET") {
  heapprof::HttpRequest r;
  r.method = method;
  size_t q = target.find('?');
  r.path = target.substr(0, q);
  if (q != std::string::npos) {
    r.raw_query = target.substr(q + 1);
    size_t start = q + 1;
    while (start <= target.size()) {  // no percent-decoding needed here
      size_t end = std::min(target.find('&', start), target.size());
      std::string kv = target.substr(start, end - start);
      size_t eq = kv.find('=');
      if (!kv.empty()) {
        r.params.emplace(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
      }
      start = end + 1;
    }
  }
  return h.Handle(r);
}

std::string Header(const heapprof::HttpReply& r, const std::string& name) {
  for (const auto& h : r.headers) {
    if (h.first == name) return h.second;
  }
  return "<none>";
}

void Endpoints() {
  FakeSource src;
  src.rows = {MakeRow(src.t.key, 4, 400, 3, 300)};
  heapprof::PprofHandler h = src.Handler();
  heapprof::HttpReply r = Get(h, "/debug/pprof/");
  CHECK(r.status == 200 && r.content_type == "text/html; charset=utf-8" &&
        r.body.find("<tr><td>1</td><td><a href='heap?debug=1'>heap</a>") != std::string::npos &&
        r.body.find("href='allocs'") != std::string::npos);
  r = Get(h, "/debug/pprof?x=1");
  CHECK(r.status == 301 && Header(r, "Location") == "/debug/pprof/?x=1" && r.body.empty());
  CHECK(Get(h, "/").status == 302);

  r = Get(h, "/debug/pprof/heap");
  CHECK(r.status == 200 && r.content_type == "application/octet-stream" &&
        Header(r, "Content-Disposition") == "attachment; filename=\"heap\"" &&
        r.body.compare(0, 2, "\x1f\x8b") == 0);
  CHECK(Get(h, "/debug/pprof/allocs", "HEAD").status == 200);
  r = Get(h, "/debug/pprof/heap?debug=1&foo=bar");  // unknown parameters are ignored
  CHECK(r.status == 200 && r.content_type == "text/plain; charset=utf-8" &&
        r.body.find("\n3: 300 [4: 400] @") != std::string::npos);
  CHECK(src.collections == 0);
  r = Get(h, "/debug/pprof/heap?gc=1&debug=1");
  CHECK(r.status == 200 && src.collections == 1 &&
        r.body.find("\n0: 0 [4: 400] @") != std::string::npos);
  CHECK(Get(h, "/debug/pprof/allocs?gc=1&gc=7").status == 200 && src.collections == 2);  // first
  CHECK(Get(h, "/debug/pprof/heap?gc=&debug=").status == 200 && src.collections == 2);   // absent
  src.collect_ok = false;
  r = Get(h, "/debug/pprof/heap?gc=1");
  CHECK(r.status == 503 && Header(r, "X-Go-Pprof") == "1");
  src.collect_ok = true;

  r = Get(h, "/debug/pprof/allocs?seconds=2");
  CHECK(r.status == 200 && src.sleeps.size() == 1 && src.sleeps[0] == 2 &&
        Header(r, "Content-Disposition") == "attachment; filename=\"allocs-delta\"");
  std::string raw;
  CHECK(pprof::Gunzip(r.body, &raw) && raw.find(Varint(1000)) != std::string::npos);
  int before = src.collections;
  CHECK(Get(h, "/debug/pprof/heap?seconds=1&gc=1").status == 200 &&
        src.collections == before + 2);  // one before each snapshot
  r = Get(h, "/debug/pprof/heap?seconds=13");
  CHECK(r.status == 503 && r.body == "heapprof: the VM is exiting\n");

  struct Bad {
    const char* target;
    const char* message;
  } bad[] = {
      {"/debug/pprof/heap?seconds=abc",
       "invalid value for \"seconds\" - must be a positive integer"},
      {"/debug/pprof/heap?seconds=0", "invalid value for \"seconds\" - must be a positive integer"},
      {"/debug/pprof/heap?seconds=-1",
       "invalid value for \"seconds\" - must be a positive integer"},
      {"/debug/pprof/heap?seconds=1e3",
       "invalid value for \"seconds\" - must be a positive integer"},
      {"/debug/pprof/heap?gc=2", "invalid value for \"gc\" - must be 0 or 1"},
      {"/debug/pprof/allocs?debug=7", "invalid value for \"debug\" - must be 0 or 1"},
      {"/debug/pprof/heap?seconds=300", "profile duration exceeds server's WriteTimeout (300 s)"},
      {"/debug/pprof/heap?seconds=1&debug=1", "seconds and debug params are incompatible"},
  };
  for (const Bad& b : bad) {
    r = Get(h, b.target);
    CHECK(r.status == 400 && r.body == std::string(b.message) + "\n" &&
          r.content_type == "text/plain; charset=utf-8" && Header(r, "X-Go-Pprof") == "1");
  }
  CHECK(src.sleeps.size() == 3);  // no bad request waited

  CHECK(Get(h, "/debug/pprof/nope").status == 404);
  CHECK(Get(h, "/debug/pprof/heap/").status == 404);
  CHECK(Get(h, "/favicon.ico").status == 404);
  r = Get(h, "/debug/pprof/heap", "POST");
  CHECK(r.status == 405 && Header(r, "Allow") == "GET, HEAD");
  CHECK(Get(h, "/debug/pprof/", "DELETE").status == 405);
  r = Get(h, "/debug/pprof/symbol?0x100017", "GET");
  CHECK(r.status == 200 && r.body == "num_symbols: 1\n0x100017 f\n");
  heapprof::HttpRequest post;
  post.method = "POST";
  post.path = "/debug/pprof/symbol";
  post.body = "0x100027+0x100017";
  CHECK(h.Handle(post).body == "num_symbols: 1\n0x100027 main\n0x100017 f\n");
  r = Get(h, "/debug/pprof/symbol", "PUT");
  CHECK(r.status == 405 && Header(r, "Allow") == "GET, HEAD, POST");
}
}  // namespace

int main() {
  Options();
  OptionParserChecks();
  Paths();
  Proto();
  Aggregation();
  DeltaProfiles();
  LegacyText();
  Endpoints();
  std::printf("unit_checks: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
