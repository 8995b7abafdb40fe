// A pprof profile (profile.proto, perftools.profiles.Profile) builder and
// encoder, and gzip.
//
// Design:
// .encoder  Hand-written encoder, as Go's runtime/pprof/protobuf.go: varints,
//     length-delimited fields and packed repeated integers are all a
//     profile needs, in ~150 lines. The alternative, protoc + libprotobuf,
//     was rejected: ~200 KB of generated code, a libprotobuf.so runtime
//     dependency loaded into the VM's process, and generated code that must
//     match the library version (docs/tools.md, "Why a hand-written encoder").
// .interning  Strings, functions and locations are interned as they are added; the
//     string table is written last (field order does not matter to readers),
//     with string_table[0] = "" as the format requires.
// .locations  One Location per distinct (function, line), one Function per distinct
//     (name, file), one Mapping (id 1) that every Location references, so
//     that pprof does not complain about a missing main binary. Fields added
//     to profile.proto after 2022 (doc_url, Line.column) are never written.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_PPROF_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_PPROF_H_

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace pprof {

// Protocol-buffer wire encoding into a growing byte string.
class ProtoWriter {
 public:
  void Varint(uint64_t v);
  void Tag(int field, int wire_type) { Varint(static_cast<uint64_t>(field) << 3 | wire_type); }
  void Uint64(int field, uint64_t v) {
    Tag(field, 0);
    Varint(v);
  }
  void Int64(int field, int64_t v) {
    Tag(field, 0);
    Varint(static_cast<uint64_t>(v));
  }
  void Uint64Opt(int field, uint64_t v) {
    if (v != 0) Uint64(field, v);
  }
  void Int64Opt(int field, int64_t v) {
    if (v != 0) Int64(field, v);
  }
  void Bool(int field, bool v) {
    if (v) Uint64(field, 1);
  }
  void Bytes(int field, const std::string& s);
  void Message(int field, const ProtoWriter& m) { Bytes(field, m.data_); }
  void PackedUint64(int field, const std::vector<uint64_t>& v);
  void PackedInt64(int field, const std::vector<int64_t>& v);
  const std::string& data() const { return data_; }
  void Clear() { data_.clear(); }

 private:
  std::string data_;
};

struct Label {
  std::string key;
  std::string str;  // a string label if num_unit is empty and is_num is false
  int64_t num = 0;
  bool is_num = false;
  std::string num_unit;  // optional, numeric labels only
};

class ProfileBuilder {
 public:
  ProfileBuilder();
  void AddSampleType(const std::string& type, const std::string& unit);
  void SetPeriod(const std::string& type, const std::string& unit, int64_t period);
  void SetDefaultSampleType(const std::string& type) { default_sample_type_ = Str(type); }
  void SetTimeNanos(int64_t t) { time_nanos_ = t; }
  void SetDurationNanos(int64_t d) { duration_nanos_ = d; }
  void SetMainBinary(const std::string& name) { mapping_file_ = Str(name); }
  void AddComment(const std::string& c) { comments_.push_back(Str(c)); }

  // The location of (function, file, line), interned.
  uint64_t Location(const std::string& function, const std::string& file, int64_t line);
  // locations: leaf first. values: one per sample type.
  void AddSample(const std::vector<uint64_t>& locations, const std::vector<int64_t>& values,
                 const std::vector<Label>& labels);

  // The encoded Profile message (not compressed).
  std::string Encode() const;

 private:
  int64_t Str(const std::string& s);
  struct ValueType {
    int64_t type, unit;
  };
  struct Function {
    uint64_t id;
    int64_t name, file;
  };
  struct Loc {
    uint64_t id, function_id;
    int64_t line;
  };
  struct EncodedLabel {
    int64_t key, str, num, num_unit;
  };
  struct Sample {
    std::vector<uint64_t> locations;
    std::vector<int64_t> values;
    std::vector<EncodedLabel> labels;
  };

  std::vector<std::string> strings_;
  std::unordered_map<std::string, int64_t> string_index_;
  std::vector<ValueType> sample_types_;
  ValueType period_type_{0, 0};
  int64_t period_ = 0;
  int64_t default_sample_type_ = 0;
  int64_t time_nanos_ = 0;
  int64_t duration_nanos_ = 0;
  int64_t mapping_file_ = 0;
  std::vector<int64_t> comments_;
  std::map<std::pair<int64_t, int64_t>, uint64_t> function_index_;  // (name, file)
  std::vector<Function> functions_;
  std::map<std::pair<uint64_t, int64_t>, uint64_t> location_index_;  // (function, line)
  std::vector<Loc> locations_;
  std::vector<Sample> samples_;
};

// gzip (RFC 1952) of `in` with zlib at the default level. False on error.
bool Gzip(const std::string& in, std::string* out);
// Inverse, for tests. False if `in` is not valid gzip.
bool Gunzip(const std::string& in, std::string* out);

}  // namespace pprof

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_PPROF_H_
