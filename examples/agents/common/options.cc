#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace agent {

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> pieces;
  for (size_t pos = 0;;) {
    const size_t next = text.find(sep, pos);
    pieces.emplace_back(text.substr(pos, next == std::string_view::npos ? text.npos : next - pos));
    if (next == std::string_view::npos) return pieces;
    pos = next + 1;
  }
}

bool SplitOptions(const char* text, OptionList* out, std::string* bad) {
  out->clear();
  if (text == nullptr) return true;
  const std::vector<std::string> items = Split(text, ',');
  for (size_t i = 0; i < items.size(); i++) {
    const std::string& item = items[i];
    if (item.empty()) {
      if (i + 1 == items.size()) break;  // a trailing comma, or an empty string
      *bad = item;
      return false;
    }
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key.empty()) {
      *bad = item;
      return false;
    }
    for (const auto& kv : *out) {
      if (kv.first == key) {
        *bad = item;
        return false;
      }
    }
    out->emplace_back(key, value);
  }
  return true;
}

bool ParseInt(const std::string& text, int64_t min, int64_t max, int64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  for (size_t i = 0; i < text.size(); i++) {
    char c = text[i];
    if (!(c >= '0' && c <= '9') && !(i == 0 && (c == '-' || c == '+'))) return false;
  }
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

bool ParseBytes(const std::string& text, int64_t min, int64_t max, int64_t* out) {
  if (text.empty()) return false;
  std::string digits = text;
  int64_t mult = 1;
  char last = text.back();
  switch (last) {
    case 'k':
    case 'K':
      mult = int64_t{1} << 10;
      break;
    case 'm':
    case 'M':
      mult = int64_t{1} << 20;
      break;
    case 'g':
    case 'G':
      mult = int64_t{1} << 30;
      break;
    default:
      break;
  }
  if (mult != 1) digits.pop_back();
  int64_t v = 0;
  if (!ParseInt(digits, 0, INT64_MAX / mult, &v) || digits[0] == '-' || digits[0] == '+') {
    return false;
  }
  v *= mult;
  if (v < min || v > max) return false;
  *out = v;
  return true;
}

bool ParseDouble(const std::string& text, double min, double max, double* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < min || v > max) return false;
  *out = v;
  return true;
}

bool SplitNames(const std::string& text, char sep, std::vector<std::string>* out) {
  *out = Split(text, sep);
  for (const std::string& name : *out) {
    if (name.empty()) return false;
  }
  return true;
}

namespace {

// A byte count as the user would write it: "512k", "4m", "2147483647".
std::string ByteText(int64_t v) {
  static const struct {
    int64_t unit;
    char suffix;
  } kUnits[] = {{int64_t{1} << 30, 'g'}, {int64_t{1} << 20, 'm'}, {int64_t{1} << 10, 'k'}};
  for (const auto& u : kUnits) {
    if (v != 0 && v % u.unit == 0) return std::to_string(v / u.unit) + u.suffix;
  }
  return std::to_string(v);
}

// " from MIN to MAX", or " >= MIN" when the top is only a type's limit.
std::string IntRange(int64_t min, int64_t max) {
  if (max >= std::numeric_limits<int32_t>::max()) return " >= " + std::to_string(min);
  return " from " + std::to_string(min) + " to " + std::to_string(max);
}

}  // namespace

void OptionParser::Add(const std::string& key, std::string want, bool empty_ok,
                       std::function<bool(const std::string&)> parse) {
  Spec spec;
  spec.key = key;
  spec.want = std::move(want);
  spec.empty_ok = empty_ok;
  spec.set = [parse = std::move(parse)](const std::string& v, std::string*) { return parse(v); };
  specs_.push_back(std::move(spec));
}

void OptionParser::Bytes(const char* key, int64_t* out, int64_t min, int64_t max,
                         const char* example) {
  // INT64_MAX is no bound a user needs to hear of; any other top is.
  std::string range = max == std::numeric_limits<int64_t>::max()
                          ? (min > 0 ? " >= " + ByteText(min) : std::string())
                          : " from " + ByteText(min) + " to " + ByteText(max);
  Add(key, "bytes" + range + ", e.g. " + example, false,
      [out, min, max](const std::string& v) { return ParseBytes(v, min, max, out); });
}

void OptionParser::Int(const char* key, int64_t* out, int64_t min, int64_t max, const char* noun) {
  Add(key, noun + IntRange(min, max), false,
      [out, min, max](const std::string& v) { return ParseInt(v, min, max, out); });
}

void OptionParser::Double(const char* key, double* out, double min, double max,
                          const char* want) {
  Add(key, want, false,
      [out, min, max](const std::string& v) { return ParseDouble(v, min, max, out); });
}

void OptionParser::Text(const char* key, std::string* out, const char* want,
                        std::function<std::string(const std::string&)> valid, bool empty_ok) {
  Spec spec;
  spec.key = key;
  spec.want = want;
  spec.empty_ok = empty_ok;
  spec.set = [out, valid = std::move(valid)](const std::string& v, std::string* why) {
    if (valid != nullptr && !v.empty()) *why = valid(v);
    if (!why->empty()) return false;
    *out = v;
    return true;
  };
  specs_.push_back(std::move(spec));
}

void OptionParser::Custom(const char* key, const char* want,
                          std::function<bool(const std::string&)> parse, bool empty_ok) {
  Add(key, want, empty_ok, std::move(parse));
}

void OptionParser::Require(const char* key, const char* usage) {
  Spec* spec = Find(key);
  if (spec == nullptr) return;  // a declaration is missing: caught by the agent's tests
  spec->required = true;
  spec->usage = usage;
}

OptionParser::Spec* OptionParser::Find(const std::string& key) {
  for (Spec& s : specs_) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

const OptionParser::Spec* OptionParser::Find(const std::string& key) const {
  return const_cast<OptionParser*>(this)->Find(key);
}

bool OptionParser::Parse(const char* text, std::string* error) const {
  OptionList list;
  std::string bad;
  if (!SplitOptions(text, &list, &bad)) {
    const size_t eq = bad.find('=');
    const std::string key = bad.substr(0, eq);
    if (key.empty()) {
      *error = BadOptionMessage(agent_, bad, "", "want key=value options separated by commas");
    } else {
      *error = BadOptionMessage(agent_, bad, "", key + " is given twice");
    }
    return false;
  }
  for (const auto& [key, value] : list) {
    const Spec* spec = Find(key);
    if (spec == nullptr) {
      std::string known;
      for (const Spec& s : specs_) known += (known.empty() ? "" : ", ") + s.key;
      *error = BadOptionMessage(agent_, key, value, "unknown option (known: " + known + ")");
      return false;
    }
    if (value.empty() && !spec->empty_ok) {
      *error = BadOptionMessage(agent_, key, "", "missing value (want " + spec->want + ")");
      return false;
    }
    std::string why;
    if (!spec->set(value, &why)) {
      *error = BadOptionMessage(agent_, key, value, why.empty() ? "want " + spec->want : why);
      return false;
    }
  }
  for (const Spec& s : specs_) {
    if (!s.required) continue;
    bool given = false;
    for (const auto& kv : list) given = given || kv.first == s.key;
    if (!given) {
      *error = std::string(agent_) + ": missing option " + s.usage;
      return false;
    }
  }
  return true;
}

bool OptionParser::ParseOrReport(const char* text) const {
  std::string error;
  if (Parse(text, &error)) return true;
  std::fprintf(stderr, "%s\n", error.c_str());
  return false;
}

std::string BadOptionMessage(const char* agent, const std::string& key, const std::string& value,
                             const std::string& why) {
  return std::string(agent) + ": bad option '" + key + (value.empty() ? "" : "=") + value +
         "': " + why;
}

int BadOption(const char* agent, const std::string& key, const std::string& value,
              const std::string& why) {
  std::fprintf(stderr, "%s\n", BadOptionMessage(agent, key, value, why).c_str());
  return 1;
}

}  // namespace agent
