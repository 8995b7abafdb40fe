// The collector's record parser and bookkeeping (examples/collector/
// session.h): exact profile values from known records, and rejection of
// every kind of malformed record without changing the session.
#include "session.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pprof.h"
#include "protocol.h"

namespace collector {
namespace {

// ---- building records ------------------------------------------------------

template <typename T>
std::vector<uint8_t> Bytes(const T& v) {
  std::vector<uint8_t> out(sizeof v);
  std::memcpy(out.data(), &v, sizeof v);
  return out;
}

void Append(std::vector<uint8_t>* out, const std::string& s) {
  out->insert(out->end(), s.begin(), s.end());
}

void Pad(std::vector<uint8_t>* p) {
  while (p->size() % 8 != 0) p->push_back(0);
}

std::vector<uint8_t> Method(uint64_t id, const std::string& name, const std::string& file) {
  auto p = Bytes(MethodRecord{id, uint32_t(name.size()), uint32_t(file.size())});
  Append(&p, name);
  Append(&p, file);
  Pad(&p);
  return p;
}
std::vector<uint8_t> Class(uint64_t id, const std::string& name) {
  auto p = Bytes(ClassRecord{id, uint32_t(name.size()), 0});
  Append(&p, name);
  Pad(&p);
  return p;
}
std::vector<uint8_t> Thread(uint32_t id, const std::string& name) {
  auto p = Bytes(ThreadRecord{id, uint32_t(name.size())});
  Append(&p, name);
  Pad(&p);
  return p;
}
std::vector<uint8_t> Alloc(uint64_t tag, uint64_t size, double weight, uint64_t klass,
                           uint32_t thread, const std::vector<FrameRecord>& frames) {
  auto p = Bytes(AllocRecord{tag, size, weight, klass, thread, uint32_t(frames.size())});
  for (const FrameRecord& f : frames) {
    auto b = Bytes(f);
    p.insert(p.end(), b.begin(), b.end());
  }
  return p;
}

// ---- reading profiles --------------------------------------------------------

struct Decoded {
  std::vector<std::string> strings;
  std::vector<std::vector<int64_t>> values;                      // per sample
  std::vector<std::vector<std::pair<int64_t, int64_t>>> labels;  // (key, str or num)
  std::vector<int64_t> comments;
};

uint64_t Varint(const std::string& b, size_t* i) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const auto c = static_cast<uint8_t>(b.at((*i)++));
    v |= uint64_t(c & 0x7f) << shift;
    if (c < 0x80) return v;
  }
}

// Calls f(field, wire_type, varint, bytes) for each field of a message.
template <typename F>
void Fields(const std::string& b, F f) {
  size_t i = 0;
  while (i < b.size()) {
    const uint64_t key = Varint(b, &i);
    if ((key & 7) == 0) {
      f(int(key >> 3), 0, Varint(b, &i), std::string());
    } else {
      ASSERT_EQ(key & 7, 2u);
      const uint64_t n = Varint(b, &i);
      f(int(key >> 3), 2, 0, b.substr(i, n));
      i += n;
    }
  }
}

Decoded Decode(const std::string& gz) {
  std::string raw;
  EXPECT_TRUE(pprof::Gunzip(gz, &raw));
  Decoded d;
  Fields(raw, [&](int field, int, uint64_t v, const std::string& b) {
    if (field == 6) d.strings.push_back(b);
    if (field == 13) d.comments.push_back(int64_t(v));
    if (field == 2) {
      std::vector<int64_t> values;
      std::vector<std::pair<int64_t, int64_t>> labels;
      Fields(b, [&](int sf, int wt, uint64_t sv, const std::string& sb) {
        if (sf == 2 && wt == 2) {
          for (size_t k = 0; k < sb.size();) values.push_back(int64_t(Varint(sb, &k)));
        } else if (sf == 2) {
          values.push_back(int64_t(sv));
        } else if (sf == 3) {
          std::pair<int64_t, int64_t> l{0, 0};
          Fields(sb, [&](int lf, int, uint64_t lv, const std::string&) {
            if (lf == 1) l.first = int64_t(lv);
            if (lf == 2 || lf == 3) l.second = int64_t(lv);
          });
          labels.push_back(l);
        }
      });
      d.values.push_back(values);
      d.labels.push_back(labels);
    }
  });
  return d;
}

bool HasString(const Decoded& d, const std::string& s) {
  for (const auto& x : d.strings) {
    if (x == s) return true;
  }
  return false;
}

class SessionTest : public ::testing::Test {
 protected:
  void Apply(RecordType type, const std::vector<uint8_t>& p) {
    std::string error;
    ASSERT_TRUE(s_.Apply(type, p.data(), p.size(), &error)) << error;
  }
  // Applies a malformed record: rejected with a message, nothing changed.
  void Reject(uint16_t type, const std::vector<uint8_t>& p, const char* what) {
    const SessionStats before = s_.stats();
    std::string error;
    EXPECT_FALSE(s_.Apply(type, p.data(), p.size(), &error)) << what;
    EXPECT_FALSE(error.empty()) << what;
    EXPECT_EQ(error.find('\n'), std::string::npos) << what;
    EXPECT_EQ(s_.stats().records, before.records) << what;
    EXPECT_EQ(s_.stats().samples, before.samples) << what;
  }
  Session s_{4096};
};

TEST_F(SessionTest, ExactValuesFromKnownRecords) {
  Apply(kClass, Class(100, "Node"));
  Apply(kThread, Thread(1, "main"));
  Apply(kMethod, Method(7, "make", "tree.mv"));
  Apply(kMethod, Method(8, "main", "tree.mv"));
  Apply(kLine, Bytes(LineRecord{7, 3, 12, 0}));
  Apply(kLine, Bytes(LineRecord{8, 9, 40, 0}));
  const std::vector<FrameRecord> stack = {{7, 3}, {8, 9}};
  // Three samples of 32-byte objects, weights 1024 each (32 objects each).
  for (uint64_t tag = 1; tag <= 3; ++tag) Apply(kAlloc, Alloc(tag, 32, 1024.0, 100, 1, stack));
  Apply(kFree, Bytes(TagRecord{2}));
  Apply(kPromote, Bytes(TagRecord{3}));
  Apply(kFree, Bytes(TagRecord{99}));  // never seen: ignored
  EXPECT_EQ(s_.stats().samples, 3u);
  EXPECT_EQ(s_.stats().frees, 2u);
  EXPECT_EQ(s_.stats().promotes, 1u);
  const Decoded d = Decode(s_.BuildProfile({"hello comment"}));
  ASSERT_EQ(d.values.size(), 1u);
  EXPECT_EQ(d.values[0], (std::vector<int64_t>{96, 3072, 64, 2048}));
  for (const char* s : {"make", "main", "tree.mv", "Node", "hello comment", "promoted_bytes"}) {
    EXPECT_TRUE(HasString(d, s)) << s;
  }
  ASSERT_EQ(d.comments.size(), 1u);
  EXPECT_EQ(d.strings[d.comments[0]], "hello comment");
  bool promoted = false;
  for (const auto& [key, value] : d.labels[0]) {
    if (d.strings[key] == "promoted_bytes") promoted = value == 1024;
  }
  EXPECT_TRUE(promoted);
}

TEST_F(SessionTest, IdsWithoutNamesStillMakeAProfile) {
  Apply(kAlloc, Alloc(1, 40, 40.0, 0xabc, 9, {{0x1234, 5}}));
  Apply(kAlloc, Alloc(2, 40, 40.0, 0xabc, 9, {}));  // no frames
  const Decoded d = Decode(s_.BuildProfile({}));
  EXPECT_TRUE(HasString(d, "<unknown method 0x1234>"));
  EXPECT_TRUE(HasString(d, "<unknown class 0xabc>"));
  EXPECT_TRUE(HasString(d, "<unknown thread 0x9>"));
  EXPECT_TRUE(HasString(d, "<unknown>"));
  EXPECT_EQ(d.values.size(), 2u);
}

TEST_F(SessionTest, RejectsMalformedRecords) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Reject(0, {}, "type 0");
  Reject(kMaxRecordType + 1, std::vector<uint8_t>(8), "unknown type");
  Reject(kAlloc, std::vector<uint8_t>(39), "short alloc");
  auto two = Alloc(1, 32, 32, 1, 1, {{1, 1}, {2, 2}});
  two.resize(two.size() - 16);
  Reject(kAlloc, two, "frame count larger than the payload");
  auto extra = Alloc(1, 32, 32, 1, 1, {{1, 1}});
  extra.resize(extra.size() + 8);
  Reject(kAlloc, extra, "payload longer than the frames");
  auto many = Alloc(1, 32, 32, 1, 1, {});
  const uint32_t huge = kMaxFrames + 1;
  std::memcpy(many.data() + 36, &huge, 4);
  Reject(kAlloc, many, "too many frames");
  Reject(kAlloc, Alloc(1, 32, nan, 1, 1, {}), "NaN weight");
  Reject(kAlloc, Alloc(1, 32, -1.0, 1, 1, {}), "negative weight");
  Reject(kAlloc, Alloc(1, 32, 1e300, 1, 1, {}), "absurd weight");
  Reject(kAlloc, Alloc(1, uint64_t(1) << 63, 32, 1, 1, {}), "absurd size");
  Reject(kAlloc, Alloc(uint64_t(1) << 63, 32, 32, 1, 1, {}), "tag beyond int64");
  Reject(kFree, std::vector<uint8_t>(16), "long free");
  Reject(kPromote, std::vector<uint8_t>(4), "short promote");
  Reject(kLine, std::vector<uint8_t>(16), "short line");
  auto m = Method(1, "f", "x.mv");
  Reject(kMethod, std::vector<uint8_t>(m.begin(), m.begin() + 8), "method shorter than fixed part");
  auto lying = Method(1, "f", "x.mv");
  const uint32_t long_name = 100;
  std::memcpy(lying.data() + 8, &long_name, 4);
  Reject(kMethod, lying, "name longer than the payload");
  auto padded = Method(1, "f", "x.mv");
  padded.resize(padded.size() + 8);
  Reject(kMethod, padded, "8 bytes of padding");
  auto big = Bytes(MethodRecord{1, kMaxNameBytes + 1, 0});
  big.resize(big.size() + AlignUp8(kMaxNameBytes + 1));
  Reject(kMethod, big, "name beyond the limit");
  Reject(kClass, std::vector<uint8_t>(8), "short class");
  Reject(kThread, std::vector<uint8_t>(4), "short thread");
  EXPECT_EQ(s_.stats().records, 0u);
}

TEST(SanitizeName, KeepsUtf8ReplacesTheRest) {
  EXPECT_EQ(SanitizeName("main"), "main");
  EXPECT_EQ(SanitizeName("a\nb\tc\x7f"), "a?b?c?");
  EXPECT_EQ(SanitizeName("caf\xc3\xa9.mv"), "caf\xc3\xa9.mv");
  EXPECT_EQ(SanitizeName("\xe2\x82\xac"), "\xe2\x82\xac");
  EXPECT_EQ(SanitizeName("\xff\xc3"), "??");       // invalid byte, truncated sequence
  EXPECT_EQ(SanitizeName("\xc0\xaf"), "??");       // overlong '/'
  EXPECT_EQ(SanitizeName("\xed\xa0\x80"), "???");  // a surrogate
  EXPECT_EQ(SanitizeName(std::string("a\0b", 3)), "a?b");
}

}  // namespace
}  // namespace collector
