#include "vm/runtime/attach_protocol.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace minivm::attach {

bool IsKnownCommand(std::string_view command) {
  for (std::string_view c : kCommands) {
    if (c == command) return true;
  }
  return false;
}

bool CommandTakesArgument(std::string_view command) { return command == "load"; }

bool CommandMayTakeArgument(std::string_view command) {
  return command == "load" || command == "heap";
}

bool ParseHistogramArgument(std::string_view argument, uint64_t* rows, std::string* error) {
  if (argument == "histo") {
    *rows = kDefaultHistogramRows;
    return true;
  }
  if (argument == "histo=all") {
    *rows = 0;
    return true;
  }
  // Digits only, no sign or space, N >= 1, and no overflow.
  constexpr std::string_view kPrefix = "histo=";
  if (argument.size() > kPrefix.size() && argument.substr(0, kPrefix.size()) == kPrefix) {
    uint64_t n = 0;
    bool digits = true;
    for (char c : argument.substr(kPrefix.size())) {
      if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10) {
        digits = false;
        break;
      }
      n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    if (digits && n >= 1) {
      *rows = n;
      return true;
    }
  }
  // The argument may be anything: quoted only when short and printable.
  bool printable = argument.size() <= 64;
  for (char c : argument) printable = printable && c >= 0x20 && c <= 0x7e;
  *error = absl::StrCat("'heap' takes 'histo', 'histo=N' (N >= 1) or 'histo=all'",
                        printable ? absl::StrCat(", not '", std::string(argument), "'") : "");
  return false;
}

namespace {

// The length of the UTF-8 sequence at `s` (at least one byte), or 0 if it
// is not well-formed (overlong forms, surrogates and values past U+10FFFF
// included), so that a terminal decoding UTF-8 sees exactly what was checked.
size_t Utf8Length(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

std::string Escape(std::string_view text, bool field) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (field) {
      const char* named = c == '\n'   ? "\\n"
                          : c == '\t' ? "\\t"
                          : c == '\r' ? "\\r"
                          : c == '\\' ? "\\\\"
                          : c == '"'  ? "\\\""
                                      : nullptr;
      if (named != nullptr) {
        out += named;
        ++i;
        continue;
      }
    } else if (c == '\n' || c == '\t') {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    const size_t n = Utf8Length(text.substr(i));
    // C1 controls (U+0080..U+009F) are C2 80..C2 9F in UTF-8.
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
    if (n == 0 || c1 || c < 0x20 || c == 0x7F) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
      ++i;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

std::string EscapeForTerminal(std::string_view text) { return Escape(text, false); }

std::string EscapeField(std::string_view text) { return Escape(text, true); }

bool ProcessEnded(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return true;
  // "PID (COMM) STATE ...": COMM may hold spaces and parentheses.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  const char state = stat[close + 2];
  return state == 'Z' || state == 'X';
}

bool IsAttachableVm(pid_t pid, std::string* why, bool* marked_out) {
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  if (marked_out != nullptr) *marked_out = false;
  DIR* dir = opendir(task_dir.c_str());
  if (dir == nullptr) {
    *why = "it has ended";
    return false;
  }
  bool marked = false;
  std::string unblocked;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string task = absl::StrCat(task_dir, "/", e->d_name);
    std::ifstream comm(task + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == kMarkerThreadName) {
      // The thread that takes SIGQUIT: in sigwait, which unblocks the
      // signals it waits for until it returns, it shows SIGQUIT unblocked.
      marked = true;
      continue;
    }
    // A thread that ended since readdir has no status: it cannot take the
    // signal. A thread made later inherits its maker's mask.
    std::ifstream status(task + "/status");
    std::string line;
    bool blocked = true;
    while (std::getline(status, line)) {
      if (line.compare(0, 7, "SigBlk:") != 0) continue;
      uint64_t mask = 0;
      blocked = absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line.substr(7)), &mask) &&
                (mask & (uint64_t{1} << (SIGQUIT - 1))) != 0;
      break;
    }
    if (!blocked && unblocked.empty()) unblocked = e->d_name;
  }
  closedir(dir);
  if (marked_out != nullptr) *marked_out = marked;
  if (!marked) {
    *why = absl::StrCat("it has no thread named '", kMarkerThreadName, "'");
    return false;
  }
  if (!unblocked.empty()) {
    *why = absl::StrCat("its thread ", unblocked, " does not block SIGQUIT");
    return false;
  }
  return true;
}

std::string AttachDirectory(uid_t uid) { return absl::StrCat("/tmp/minivm-attach-", uid); }

std::string SocketPath(uid_t uid, pid_t pid) {
  return absl::StrCat(AttachDirectory(uid), "/", pid, ".sock");
}

std::string TriggerPath(uid_t uid, pid_t pid) {
  return absl::StrCat(AttachDirectory(uid), "/", pid, ".trigger");
}

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint32_t GetU32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

std::string EncodeRequest(std::string_view command, std::string_view argument, bool has_argument) {
  std::string payload(command);
  if (has_argument) {
    payload.push_back('\0');
    payload.append(argument);
  }
  std::string out(kMagic, sizeof kMagic);
  PutU32(&out, static_cast<uint32_t>(payload.size()));
  out += payload;
  return out;
}

std::string EncodeReply(uint32_t status, std::string_view text) {
  std::string out(kMagic, sizeof kMagic);
  PutU32(&out, status);
  PutU32(&out, static_cast<uint32_t>(text.size()));
  out.append(text);
  return out;
}

bool ParseRequestPayload(std::string_view payload, std::string* command, std::string* argument,
                         bool* has_argument, std::string* error) {
  const size_t nul = payload.find('\0');
  const std::string_view name = payload.substr(0, nul);
  *has_argument = nul != std::string_view::npos;
  const std::string_view arg = *has_argument ? payload.substr(nul + 1) : std::string_view();
  if (arg.find('\0') != std::string_view::npos) {
    *error = "malformed request: more than one argument";
    return false;
  }
  if (!IsKnownCommand(name)) {
    // Printable names only in the reply: the request may be anything.
    bool printable = name.size() <= 64;
    for (char c : name) printable = printable && c >= 0x21 && c <= 0x7e;
    *error =
        printable ? absl::StrCat("unknown command '", std::string(name), "'") : "unknown command";
    return false;
  }
  if (CommandTakesArgument(name) && (!*has_argument || arg.empty())) {
    *error = absl::StrCat("'", std::string(name), "' needs an argument");
    return false;
  }
  if (!CommandMayTakeArgument(name) && *has_argument) {
    *error = absl::StrCat("'", std::string(name), "' takes no argument");
    return false;
  }
  uint64_t rows = 0;
  if (name == "heap" && *has_argument && !ParseHistogramArgument(arg, &rows, error)) {
    return false;
  }
  *command = std::string(name);
  *argument = std::string(arg);
  return true;
}

bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

IoResult ReadExactly(int fd, char* buf, size_t size, Clock::time_point deadline) {
  size_t got = 0;
  while (got < size) {
    if (!WaitFor(fd, POLLIN, deadline)) return IoResult::kTimedOut;
    const ssize_t n = recv(fd, buf + got, size - got, MSG_DONTWAIT);
    if (n == 0) return IoResult::kClosed;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return IoResult::kClosed;
    }
    got += static_cast<size_t>(n);
  }
  return IoResult::kDone;
}

IoResult SendAll(int fd, std::string_view data, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    if (!WaitFor(fd, POLLOUT, deadline)) return IoResult::kTimedOut;
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return IoResult::kClosed;
    }
    sent += static_cast<size_t>(n);
  }
  return IoResult::kDone;
}

}  // namespace minivm::attach
