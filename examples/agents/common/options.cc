#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace agent {

bool SplitOptions(const char* text, OptionList* out, std::string* bad) {
  out->clear();
  if (text == nullptr) return true;
  std::string s(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      if (comma == s.size()) break;  // a trailing comma, or an empty string
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
  out->clear();
  size_t pos = 0;
  while (true) {
    size_t next = text.find(sep, pos);
    std::string name = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    if (name.empty()) return false;
    out->push_back(name);
    if (next == std::string::npos) return true;
    pos = next + 1;
  }
}

int BadOption(const char* agent, const std::string& key, const std::string& value,
              const char* why) {
  std::fprintf(stderr, "%s: bad option '%s%s%s': %s\n", agent, key.c_str(),
               value.empty() ? "" : "=", value.c_str(), why);
  return 1;
}

}  // namespace agent
