#include "pprof.h"

#include <zlib.h>

#include <cstring>

namespace pprof {

// Field numbers of profile.proto.
namespace field {
constexpr int kProfileSampleType = 1, kProfileSample = 2, kProfileMapping = 3, kProfileLocation = 4,
              kProfileFunction = 5, kProfileStringTable = 6, kProfileTimeNanos = 9,
              kProfileDurationNanos = 10, kProfilePeriodType = 11, kProfilePeriod = 12,
              kProfileComment = 13, kProfileDefaultSampleType = 14;
constexpr int kValueTypeType = 1, kValueTypeUnit = 2;
constexpr int kSampleLocationId = 1, kSampleValue = 2, kSampleLabel = 3;
constexpr int kLabelKey = 1, kLabelStr = 2, kLabelNum = 3, kLabelNumUnit = 4;
constexpr int kMappingId = 1, kMappingFilename = 5, kMappingHasFunctions = 7,
              kMappingHasFilenames = 8, kMappingHasLineNumbers = 9;
constexpr int kLocationId = 1, kLocationMappingId = 2, kLocationLine = 4;
constexpr int kLineFunctionId = 1, kLineLine = 2;
constexpr int kFunctionId = 1, kFunctionName = 2, kFunctionSystemName = 3, kFunctionFilename = 4;
}  // namespace field

void ProtoWriter::Varint(uint64_t v) {
  while (v >= 0x80) {
    data_.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  data_.push_back(static_cast<char>(v));
}

void ProtoWriter::Bytes(int field, const std::string& s) {
  Tag(field, 2);
  Varint(s.size());
  data_ += s;
}

void ProtoWriter::PackedUint64(int field, const std::vector<uint64_t>& v) {
  if (v.empty()) return;
  ProtoWriter p;
  for (uint64_t x : v) p.Varint(x);
  Bytes(field, p.data_);
}

void ProtoWriter::PackedInt64(int field, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  ProtoWriter p;
  for (int64_t x : v) p.Varint(static_cast<uint64_t>(x));
  Bytes(field, p.data_);
}

ProfileBuilder::ProfileBuilder() { Str(""); }

int64_t ProfileBuilder::Str(const std::string& s) {
  auto it = string_index_.find(s);
  if (it != string_index_.end()) return it->second;
  int64_t id = static_cast<int64_t>(strings_.size());
  strings_.push_back(s);
  string_index_.emplace(s, id);
  return id;
}

void ProfileBuilder::AddSampleType(const std::string& type, const std::string& unit) {
  sample_types_.push_back({Str(type), Str(unit)});
}

void ProfileBuilder::SetPeriod(const std::string& type, const std::string& unit, int64_t period) {
  period_type_ = {Str(type), Str(unit)};
  period_ = period;
}

uint64_t ProfileBuilder::Location(const std::string& function, const std::string& file,
                                  int64_t line) {
  int64_t name = Str(function);
  int64_t fname = Str(file);
  auto fkey = std::make_pair(name, fname);
  auto fit = function_index_.find(fkey);
  uint64_t function_id;
  if (fit == function_index_.end()) {
    function_id = functions_.size() + 1;
    functions_.push_back({function_id, name, fname});
    function_index_.emplace(fkey, function_id);
  } else {
    function_id = fit->second;
  }
  auto lkey = std::make_pair(function_id, line);
  auto lit = location_index_.find(lkey);
  if (lit != location_index_.end()) return lit->second;
  uint64_t id = locations_.size() + 1;
  locations_.push_back({id, function_id, line});
  location_index_.emplace(lkey, id);
  return id;
}

void ProfileBuilder::AddSample(const std::vector<uint64_t>& locations,
                               const std::vector<int64_t>& values,
                               const std::vector<Label>& labels) {
  Sample s;
  s.locations = locations;
  s.values = values;
  s.values.resize(sample_types_.size(), 0);
  for (const Label& l : labels) {
    EncodedLabel e{Str(l.key), 0, 0, 0};
    if (l.is_num) {
      e.num = l.num;
      if (!l.num_unit.empty()) e.num_unit = Str(l.num_unit);
    } else {
      e.str = Str(l.str);
    }
    s.labels.push_back(e);
  }
  samples_.push_back(std::move(s));
}

std::string ProfileBuilder::Encode() const {
  using namespace field;
  ProtoWriter out, m, sub;
  for (const ValueType& vt : sample_types_) {
    m.Clear();
    m.Int64Opt(kValueTypeType, vt.type);
    m.Int64Opt(kValueTypeUnit, vt.unit);
    out.Message(kProfileSampleType, m);
  }
  for (const Sample& s : samples_) {
    m.Clear();
    m.PackedUint64(kSampleLocationId, s.locations);
    m.PackedInt64(kSampleValue, s.values);
    for (const EncodedLabel& l : s.labels) {
      sub.Clear();
      sub.Int64Opt(kLabelKey, l.key);
      sub.Int64Opt(kLabelStr, l.str);
      sub.Int64Opt(kLabelNum, l.num);
      sub.Int64Opt(kLabelNumUnit, l.num_unit);
      m.Message(kSampleLabel, sub);
    }
    out.Message(kProfileSample, m);
  }
  m.Clear();
  m.Uint64(kMappingId, 1);
  m.Int64Opt(kMappingFilename, mapping_file_);
  m.Bool(kMappingHasFunctions, true);
  m.Bool(kMappingHasFilenames, true);
  m.Bool(kMappingHasLineNumbers, true);
  out.Message(kProfileMapping, m);
  for (const Loc& l : locations_) {
    m.Clear();
    m.Uint64(kLocationId, l.id);
    m.Uint64(kLocationMappingId, 1);
    sub.Clear();
    sub.Uint64(kLineFunctionId, l.function_id);
    sub.Int64Opt(kLineLine, l.line);
    m.Message(kLocationLine, sub);
    out.Message(kProfileLocation, m);
  }
  for (const Function& f : functions_) {
    m.Clear();
    m.Uint64(kFunctionId, f.id);
    m.Int64Opt(kFunctionName, f.name);
    m.Int64Opt(kFunctionSystemName, f.name);
    m.Int64Opt(kFunctionFilename, f.file);
    out.Message(kProfileFunction, m);
  }
  for (const std::string& s : strings_) out.Bytes(kProfileStringTable, s);
  out.Int64Opt(kProfileTimeNanos, time_nanos_);
  out.Int64Opt(kProfileDurationNanos, duration_nanos_);
  m.Clear();
  m.Int64Opt(kValueTypeType, period_type_.type);
  m.Int64Opt(kValueTypeUnit, period_type_.unit);
  out.Message(kProfilePeriodType, m);
  out.Int64Opt(kProfilePeriod, period_);
  for (int64_t c : comments_) out.Int64(kProfileComment, c);
  out.Int64Opt(kProfileDefaultSampleType, default_sample_type_);
  return out.data();
}

bool Gzip(const std::string& in, std::string* out) {
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  // 15 + 16: a gzip wrapper rather than zlib's.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return false;
  }
  out->resize(deflateBound(&zs, in.size()) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(&(*out)[0]);
  zs.avail_out = static_cast<uInt>(out->size());
  int rc = deflate(&zs, Z_FINISH);
  out->resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END;
}

bool Gunzip(const std::string& in, std::string* out) {
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return false;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  out->clear();
  char buf[16384];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return false;
    }
    out->append(buf, sizeof buf - zs.avail_out);
  } while (rc != Z_STREAM_END);
  inflateEnd(&zs);
  return true;
}

}  // namespace pprof
