// Agent option strings: "key=value,key=value", as -agentlib:NAME=OPTIONS
// passes them. Values may not contain ','; a key without '=' has an empty
// value.
//
// Every tool agent declares its options on one OptionParser, which parses
// them and words every error the same way for every agent, on one line that
// names the agent and the option (the agent then fails to load: exit code 1,
// docs/tools.md):
//
//   NAME: bad option 'bogus=1': unknown option (known: interval, file, ...)
//   NAME: bad option 'depth=3': depth is given twice
//   NAME: bad option 'file': missing value (want a file path)
//   NAME: bad option 'depth=0': want a frame count from 1 to 4096
//   NAME: bad option ',': want key=value options separated by commas
//   NAME: missing option socket=PATH (the collector's socket)
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_OPTIONS_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agent {

// One agent's options. Declare each (the order is the order "known:" lists
// them), then Parse. A declaration keeps a pointer to where the value goes;
// what is there when Parse starts is the default.
class OptionParser {
 public:
  explicit OptionParser(const char* agent) : agent_(agent) {}

  // "4096", "512k", "1m", "2g" (binary units) in [min, max]; `example`
  // completes "e.g. ...".
  void Bytes(const char* key, int64_t* out, int64_t min, int64_t max, const char* example);
  // A decimal integer in [min, max]; `noun` says what it counts ("a frame
  // count").
  void Int(const char* key, int64_t* out, int64_t min, int64_t max, const char* noun);
  // The options every sampling tool takes, worded the same in each:
  // interval=BYTES, the mean bytes between samples (0: every allocation),
  // and depth=N, the frames kept of each sample's stack (1 to max_depth).
  void Interval(int64_t* out) { Bytes("interval", out, 0, INT32_MAX, "4096 or 512k"); }
  void Depth(int64_t* out, int64_t max_depth = 4096) {
    Int("depth", out, 1, max_depth, "a frame count");
  }
  // A decimal number in [min, max]; `want` describes the range in words
  // ("a probability in [0.5, 1), e.g. 0.9999").
  void Double(const char* key, double* out, double min, double max, const char* want);
  // One of a few words, each with its value.
  template <typename T>
  void Choice(const char* key, T* out, std::vector<std::pair<std::string, T>> words) {
    std::string want;
    for (size_t i = 0; i < words.size(); i++) {
      want += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i].first;
    }
    Add(key, want, false, [out, words](const std::string& v) {
      for (const auto& w : words) {
        if (w.first == v) {
          *out = w.second;
          return true;
        }
      }
      return false;
    });
  }
  // Text (a path, an address). `want` describes a good value; `valid`
  // (optional) returns "" for one, else why not (then the message's "want
  // ..."). `empty_ok`: an empty value is a value (heapprof's `file=`: no
  // file); otherwise it is a missing value.
  void Text(const char* key, std::string* out, const char* want,
            std::function<std::string(const std::string&)> valid = nullptr, bool empty_ok = false);
  // Anything else: `parse` stores the value and returns true, or returns
  // false for a value that is not `want`. `empty_ok` as for Text.
  void Custom(const char* key, const char* want, std::function<bool(const std::string&)> parse,
              bool empty_ok = false);
  // An option without which the agent cannot run; `usage` completes
  // "missing option " (e.g. "socket=PATH (the collector's socket)").
  void Require(const char* key, const char* usage);

  // Parses `text` (NULL or empty: no options) into the declared places. On
  // the first bad option returns false with its one line (no newline) in
  // *error.
  bool Parse(const char* text, std::string* error) const;
  // Parse, printing the line on stderr.
  bool ParseOrReport(const char* text) const;

  const char* agent() const { return agent_; }

 private:
  struct Spec {
    std::string key;
    std::string want;
    bool empty_ok = false;
    bool required = false;
    std::string usage;  // for a required option
    // Stores a good value and returns true; else false, with *why set
    // if there is more to say than "want <want>".
    std::function<bool(const std::string& value, std::string* why)> set;
  };
  void Add(const std::string& key, std::string want, bool empty_ok,
           std::function<bool(const std::string&)> parse);
  Spec* Find(const std::string& key);
  const Spec* Find(const std::string& key) const;

  const char* agent_;
  std::vector<Spec> specs_;
};

// The one-line message for a bad option: "<agent>: bad option
// '<key>[=<value>]': <why>".
std::string BadOptionMessage(const char* agent, const std::string& key, const std::string& value,
                             const std::string& why);
// Prints BadOptionMessage on stderr and returns 1, the value Agent_OnLoad
// returns to stop the VM. For checks made after parsing (an output that
// cannot be opened, a port that is taken).
int BadOption(const char* agent, const std::string& key, const std::string& value,
              const std::string& why);

// The parts OptionParser is made of, for anything else that reads options
// (tests/tools/unit_checks.cc).
using OptionList = std::vector<std::pair<std::string, std::string>>;

// Splits `text` (NULL or empty: no options). Returns false for an empty key
// or a key given twice, with the offending option in *bad.
bool SplitOptions(const char* text, OptionList* out, std::string* bad);

// "4096", "512k", "1m", "2g" (binary units, case-insensitive) into bytes in
// [min, max]. Returns false if malformed or out of range.
bool ParseBytes(const std::string& text, int64_t min, int64_t max, int64_t* out);

// A decimal integer in [min, max].
bool ParseInt(const std::string& text, int64_t min, int64_t max, int64_t* out);

// A decimal number (strtod) in [min, max].
bool ParseDouble(const std::string& text, double min, double max, double* out);

// `text` cut at every `sep`: "a,,b" is {"a", "", "b"}, "" is {""}. Not
// absl::StrSplit: the tool agents depend on vmti.h, the standard library,
// zlib and their own one library each, and a split does not justify adding
// Abseil to every agent's dependencies.
std::vector<std::string> Split(std::string_view text, char sep);

// "a+b+c" into {"a", "b", "c"}; false if any name is empty.
bool SplitNames(const std::string& text, char sep, std::vector<std::string>* out);

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_OPTIONS_H_
