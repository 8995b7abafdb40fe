#include "session.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "protocol.h"

namespace collector {
namespace {

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // payloads are copies, but not necessarily aligned for T
  return v;
}

// A variable-length payload: fixed part, then `n1 + n2` bytes, then fewer
// than 8 bytes of padding (records are 8-byte aligned).
bool LengthsFit(size_t bytes, size_t fixed, uint64_t n1, uint64_t n2, std::string* error) {
  if (n1 > kMaxNameBytes || n2 > kMaxNameBytes) {
    *error = "name longer than " + std::to_string(kMaxNameBytes) + " bytes";
    return false;
  }
  const uint64_t need = fixed + n1 + n2;
  if (bytes < need || bytes - need >= 8) {
    *error = "payload of " + std::to_string(bytes) + " bytes for " + std::to_string(need) +
             " bytes of fields and names";
    return false;
  }
  return true;
}

bool ExactSize(size_t bytes, size_t want, const char* what, std::string* error) {
  if (bytes == want) return true;
  *error = std::string(what) + " record of " + std::to_string(bytes) + " bytes, want " +
           std::to_string(want);
  return false;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string SanitizeName(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
      i++;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlongs, no surrogates, <= U+10FFFF).
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) {
      n = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      n = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      n = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xc0) == 0x80;
      cp = cp << 6 | (cc & 0x3f);
    }
    ok = ok && cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      out += '?';
      i++;
    }
  }
  return out;
}

bool Session::Full(size_t table_size, const char* what, std::string* error) const {
  if (table_size < kMaxTableEntries) return false;
  *error = std::string("more than ") + std::to_string(kMaxTableEntries) + " distinct " + what;
  return true;
}

uint32_t Session::Symbol(bool is_class, uint64_t id) {
  auto& index = is_class ? class_symbols_ : thread_symbols_;
  // find() first: emplace() would allocate a node for every record.
  if (auto it = index.find(id); it != index.end()) return it->second;
  const auto sym = static_cast<uint32_t>(symbols_.size());
  index.emplace(id, sym);
  symbols_.push_back(SymbolKey{is_class, id});
  return sym;
}

bool Session::ApplyAlloc(const uint8_t* p, size_t bytes, std::string* error) {
  if (bytes < sizeof(AllocRecord)) return ExactSize(bytes, sizeof(AllocRecord), "alloc", error);
  const auto rec = Load<AllocRecord>(p);
  if (rec.frame_count > kMaxFrames) {
    *error = "alloc record with " + std::to_string(rec.frame_count) + " frames (at most " +
             std::to_string(kMaxFrames) + ")";
    return false;
  }
  if (!ExactSize(bytes, sizeof(AllocRecord) + rec.frame_count * sizeof(FrameRecord), "alloc",
                 error)) {
    return false;
  }
  // Weights and sizes far beyond any heap would only make nonsense (and
  // infinities) of the sums.
  constexpr double kMaxBytes = 0x1p62;
  if (!std::isfinite(rec.weight) || rec.weight < 0 || rec.weight > kMaxBytes ||
      rec.size > static_cast<uint64_t>(kMaxBytes) || rec.tag > INT64_MAX) {
    *error = "alloc record with size " + std::to_string(rec.size) + ", weight " +
             std::to_string(rec.weight) + ", tag " + std::to_string(rec.tag);
    return false;
  }
  // Check the table limits before changing anything (session.h .validate-first).
  if (Full(frames_.size() + rec.frame_count, "frames", error) ||
      Full(stacks_.size() + 1, "stacks", error) ||
      Full(symbols_.size() + 2, "classes and threads", error)) {
    return false;
  }
  // Lookups before inserts, into reused buffers: this runs once per sample
  // of every VM, and emplace() would allocate a node each time.
  std::vector<uint32_t>& frame_ids = scratch_frames_;
  frame_ids.resize(rec.frame_count);
  for (uint32_t i = 0; i < rec.frame_count; ++i) {
    const auto f = Load<FrameRecord>(p + sizeof(AllocRecord) + i * sizeof(FrameRecord));
    const FrameKey key{f.method, f.location};
    auto it = frame_index_.find(key);
    if (it == frame_index_.end()) {
      it = frame_index_.emplace(key, static_cast<uint32_t>(frames_.size())).first;
      frames_.push_back(key);
    }
    frame_ids[i] = it->second;
  }
  uint32_t stack = 0;  // no frames: the "<unknown>" stack
  if (!frame_ids.empty()) {
    std::string& raw = scratch_key_;
    raw.assign(reinterpret_cast<const char*>(frame_ids.data()),
               frame_ids.size() * sizeof(uint32_t));
    auto it = stack_index_.find(raw);
    if (it == stack_index_.end()) {
      it = stack_index_.emplace(raw, static_cast<uint32_t>(stacks_.size())).first;
      stacks_.push_back(frame_ids);
    }
    stack = it->second;
  }
  heapprof::SiteKey key{stack, Symbol(true, rec.klass), Symbol(false, rec.thread)};
  data_.RecordAlloc(static_cast<int64_t>(rec.tag), key, rec.weight, static_cast<int64_t>(rec.size));
  stats_.samples++;
  return true;
}

bool Session::Apply(uint16_t type, const uint8_t* p, size_t bytes, std::string* error) {
  bool ok = false;
  switch (type) {
    case kAlloc:
      ok = ApplyAlloc(p, bytes, error);
      break;
    case kFree:
    case kPromote: {
      if (!ExactSize(bytes, sizeof(TagRecord), type == kFree ? "free" : "promote", error)) break;
      const auto rec = Load<TagRecord>(p);
      // Tags the session never saw alive (dropped allocs, repeats) are ignored
      // by HeapData: a free cannot make in-use values negative.
      if (type == kFree) {
        data_.RecordFree(static_cast<int64_t>(rec.tag));
        stats_.frees++;
      } else {
        data_.RecordPromote(static_cast<int64_t>(rec.tag));
        stats_.promotes++;
      }
      ok = true;
      break;
    }
    case kMethod: {
      if (bytes < sizeof(MethodRecord)) {
        ExactSize(bytes, sizeof(MethodRecord), "method", error);
        break;
      }
      const auto rec = Load<MethodRecord>(p);
      if (!LengthsFit(bytes, sizeof rec, rec.name_bytes, rec.file_bytes, error)) break;
      if (methods_.count(rec.method) == 0 && Full(methods_.size(), "methods", error)) break;
      const char* s = reinterpret_cast<const char*>(p + sizeof rec);
      MethodNames& m = methods_[rec.method];  // a repeat (two threads raced) replaces
      m.name = SanitizeName(std::string(s, rec.name_bytes));
      m.file = SanitizeName(std::string(s + rec.name_bytes, rec.file_bytes));
      ok = true;
      break;
    }
    case kLine: {
      if (!ExactSize(bytes, sizeof(LineRecord), "line", error)) break;
      const auto rec = Load<LineRecord>(p);
      const FrameKey key{rec.method, rec.location};
      if (lines_.count(key) == 0 && Full(lines_.size(), "lines", error)) break;
      lines_[key] = rec.line < 0 ? 0 : rec.line;
      ok = true;
      break;
    }
    case kClass:
    case kThread: {
      uint64_t id;
      uint32_t name_bytes;
      size_t fixed;
      if (type == kClass) {
        if (bytes < sizeof(ClassRecord)) {
          ExactSize(bytes, sizeof(ClassRecord), "class", error);
          break;
        }
        const auto rec = Load<ClassRecord>(p);
        id = rec.klass, name_bytes = rec.name_bytes, fixed = sizeof rec;
      } else {
        if (bytes < sizeof(ThreadRecord)) {
          ExactSize(bytes, sizeof(ThreadRecord), "thread", error);
          break;
        }
        const auto rec = Load<ThreadRecord>(p);
        id = rec.thread, name_bytes = rec.name_bytes, fixed = sizeof rec;
      }
      if (!LengthsFit(bytes, fixed, name_bytes, 0, error)) break;
      auto& names = type == kClass ? class_names_ : thread_names_;
      if (names.count(id) == 0 && Full(names.size(), "names", error)) break;
      names[id] = SanitizeName(std::string(reinterpret_cast<const char*>(p + fixed), name_bytes));
      ok = true;
      break;
    }
    default:
      *error = "unknown record type " + std::to_string(type);
      break;
  }
  if (ok) stats_.records++;
  return ok;
}

std::string Session::BuildProfile(const std::vector<std::string>& comments) const {
  agent::SiteTable::Snapshot snap;
  snap.frames.reserve(frames_.size());
  snap.frames.push_back(agent::Frame{"<unknown>", "", 0});
  for (size_t i = 1; i < frames_.size(); ++i) {
    const FrameKey& k = frames_[i];
    agent::Frame f;
    auto m = methods_.find(k.method);
    if (m != methods_.end()) {
      f.function = m->second.name.empty() ? "<unnamed>" : m->second.name;
      f.file = m->second.file;
    } else {
      f.function = "<unknown method " + Hex(k.method) + ">";
    }
    auto l = lines_.find(k);
    f.line = l != lines_.end() ? l->second : 0;
    snap.frames.push_back(std::move(f));
  }
  snap.stacks.assign(stacks_.begin(), stacks_.end());
  snap.strings.reserve(symbols_.size());
  snap.strings.push_back("<unknown>");
  for (size_t i = 1; i < symbols_.size(); ++i) {
    const SymbolKey& s = symbols_[i];
    const auto& names = s.is_class ? class_names_ : thread_names_;
    auto it = names.find(s.id);
    if (it != names.end() && !it->second.empty()) {
      snap.strings.push_back(it->second);
    } else {
      snap.strings.push_back((s.is_class ? "<unknown class " : "<unknown thread ") + Hex(s.id) +
                             ">");
    }
  }
  std::vector<heapprof::Row> rows;
  data_.Copy(&rows);
  return heapprof::BuildPprof(rows, snap, interval_, heapprof::ProfileKind::kHeap, comments);
}

}  // namespace collector
