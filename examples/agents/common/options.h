// Agent option strings: "key=value,key=value", as -agentlib:NAME=OPTIONS
// passes them. Values may not contain ','; a key without '=' has an empty
// value. Each agent walks the pairs and rejects what it does not know, so
// that every bad option is reported by name on one line.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_OPTIONS_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_OPTIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace agent {

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

// "a+b+c" into {"a", "b", "c"}; false if any name is empty.
bool SplitNames(const std::string& text, char sep, std::vector<std::string>* out);

// Prints "<agent>: bad option '<key>=<value>': <why>" to stderr and returns 1,
// the value Agent_OnLoad returns to stop the VM.
int BadOption(const char* agent, const std::string& key, const std::string& value, const char* why);

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_OPTIONS_H_
