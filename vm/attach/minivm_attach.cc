// minivm-attach PID COMMAND [ARGUMENT]: talks to a running minivm VM
// through its attach listener (docs/attach.md, docs/tools.md).
//
// Exit codes (../shared/spec/vmti.md, "Attaching to a running VM"): 0 the
// VM answered and did it; 1 a dead PID, a process that is not a minivm VM,
// no answer within 10 s, a VM that refuses, an agent whose Agent_OnAttach
// failed; 2 bad usage. Errors are one line on stderr.
//
// Steps: if the VM's socket accepts a connection, use it. Otherwise check
// that PID is a minivm VM (its main thread blocks SIGQUIT, which the VM's
// signal dispatcher takes; a process that does not would be killed by it),
// create the trigger file (only the client that creates it sends the
// signal, so two clients attaching at once never send a SIGQUIT the VM
// would take for Ctrl-\), send SIGQUIT, and wait for the socket.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "vm/runtime/attach_protocol.h"

namespace {

using minivm::attach::Clock;
using minivm::attach::IoResult;
constexpr std::chrono::seconds kTimeout{10};

constexpr char kUsage[] =
    "usage: minivm-attach PID COMMAND [ARGUMENT]\n"
    "commands:\n"
    "  load PATH_OR_NAME[=OPTIONS]  load an agent into the VM (Agent_OnAttach)\n"
    "  threads                      every thread's stack\n"
    "  heap [histo[=N|all]]         heap usage, collections, sampling; with histo, also\n"
    "                               the live objects per class (the N largest by bytes,\n"
    "                               20 by default, or all): jmap -histo:live\n"
    "  gc                           a full collection\n"
    "  agents                       the loaded agents and their options\n";

int Fail(const std::string& message, int code) {
  // One line, whatever the VM sent.
  std::string line =
      absl::StrReplaceAll(absl::StripTrailingAsciiWhitespace(message), {{"\n", "; "}});
  std::fprintf(stderr, "minivm-attach: error: %s\n", line.c_str());
  return code;
}

int Usage(const std::string& message) {
  return Fail(absl::StrCat(message, " (usage: minivm-attach PID COMMAND [ARGUMENT]; ",
                           "minivm-attach --help lists the commands)"),
              2);
}

// A field of /proc/PID/status, or "" if the file or field is missing.
std::string StatusField(pid_t pid, const std::string& name) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, name.size() + 1, name + ":") == 0) {
      return std::string(absl::StripAsciiWhitespace(line.substr(name.size() + 1)));
    }
  }
  return "";
}

int Connect(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return -1;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Makes sure the VM's private folder exists with the VM's owner and 0700
// (a root client making it for another user's VM hands it over).
bool PrepareDirectory(uid_t vm_uid, std::string* error) {
  const std::string dir = minivm::attach::AttachDirectory(vm_uid);
  if (mkdir(dir.c_str(), 0700) == 0) {
    if (geteuid() != vm_uid && chown(dir.c_str(), vm_uid, static_cast<gid_t>(-1)) != 0) {
      *error = absl::StrCat("cannot give ", dir, " to user ", vm_uid, ": ", std::strerror(errno));
      return false;
    }
  } else if (errno != EEXIST) {
    *error = absl::StrCat("cannot create ", dir, ": ", std::strerror(errno));
    return false;
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != vm_uid ||
      (st.st_mode & 077) != 0) {
    *error = absl::StrCat(dir, " is not a folder of user ", vm_uid, " with mode 0700");
    return false;
  }
  return true;
}

// Creates the trigger; true if this client made it and must signal.
bool MakeTrigger(const std::string& trigger, std::string* error, bool* made) {
  *made = false;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd =
        open(trigger.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      close(fd);
      *made = true;
      return true;
    }
    if (errno != EEXIST) {
      *error = absl::StrCat("cannot create ", trigger, ": ", std::strerror(errno));
      return false;
    }
    // Another client's request in flight, or one left by a client that
    // died before signalling: that one is old, replace it.
    struct stat st;
    if (lstat(trigger.c_str(), &st) == 0 && time(nullptr) - st.st_mtime > 10) {
      unlink(trigger.c_str());
      continue;
    }
    return true;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  if (argc < 3) return Usage("expected a PID and a command");
  if (argc > 4) return Usage("too many arguments");
  int64_t pid_value = 0;
  if (!absl::SimpleAtoi(argv[1], &pid_value) || pid_value <= 0 || pid_value > INT_MAX) {
    return Usage(absl::StrCat("'", argv[1], "' is not a process id"));
  }
  const pid_t pid = static_cast<pid_t>(pid_value);
  const std::string command = argv[2];
  if (!minivm::attach::IsKnownCommand(command)) {
    return Usage(absl::StrCat("unknown command '", command, "'"));
  }
  const bool has_argument = argc == 4;
  std::string argument = has_argument ? argv[3] : "";
  if (minivm::attach::CommandTakesArgument(command) && (!has_argument || argument.empty())) {
    return Usage(absl::StrCat("'", command, "' needs an argument (PATH_OR_NAME[=OPTIONS])"));
  }
  if (!minivm::attach::CommandMayTakeArgument(command) && has_argument) {
    return Usage(absl::StrCat("'", command, "' takes no argument"));
  }
  if (command == "heap" && has_argument) {
    uint64_t rows = 0;
    std::string error;
    if (!minivm::attach::ParseHistogramArgument(argument, &rows, &error)) return Usage(error);
  }
  if (command == "load") {
    // A library path is the client's: the VM's working folder may differ.
    const size_t eq = argument.find('=');
    const std::string target = argument.substr(0, eq);
    if (target.empty()) return Usage("'load' needs a library path or name before '='");
    if (target.find('/') != std::string::npos || access(target.c_str(), F_OK) == 0) {
      char resolved[PATH_MAX];
      if (realpath(target.c_str(), resolved) == nullptr) {
        return Fail(absl::StrCat("cannot load agent '", target, "': ", std::strerror(errno)), 1);
      }
      argument = absl::StrCat(resolved, eq == std::string::npos ? "" : argument.substr(eq));
    }
  }
  const std::string request = minivm::attach::EncodeRequest(command, argument, has_argument);
  if (request.size() > 8 + minivm::attach::kMaxRequestBytes) {
    return Usage("the argument is too long");
  }

  const Clock::time_point deadline = Clock::now() + kTimeout;
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    return Fail(absl::StrCat("no process ", pid), 1);
  }
  // The VM's effective uid names its folder.
  uint32_t vm_uid = 0;
  {
    std::vector<std::string> uids =
        absl::StrSplit(StatusField(pid, "Uid"), absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (uids.size() < 2 || !absl::SimpleAtoi(uids[1], &vm_uid)) {
      return Fail(absl::StrCat("no process ", pid), 1);
    }
  }
  if (geteuid() != 0 && geteuid() != vm_uid) {
    return Fail(absl::StrCat("permission denied: process ", pid, " belongs to user ", vm_uid,
                             " (only that user and root can attach)"),
                1);
  }
  const std::string socket_path = minivm::attach::SocketPath(vm_uid, pid);
  int fd = Connect(socket_path);
  if (fd < 0) {
    // Not listening yet. SigBlk is hexadecimal; SIGQUIT is bit 3 - 1.
    uint64_t blocked = 0;
    const std::string sigblk = StatusField(pid, "SigBlk");
    if (sigblk.empty()) return Fail(absl::StrCat("no process ", pid), 1);
    if (!absl::SimpleHexAtoi(sigblk, &blocked) || (blocked & (uint64_t{1} << (SIGQUIT - 1))) == 0) {
      return Fail(
          absl::StrCat("process ", pid, " is not a minivm VM (it takes no attach requests)"), 1);
    }
    std::string error;
    if (!PrepareDirectory(vm_uid, &error)) return Fail(error, 1);
    const std::string trigger = minivm::attach::TriggerPath(vm_uid, pid);
    bool made = false;
    if (!MakeTrigger(trigger, &error, &made)) return Fail(error, 1);
    if (made && kill(pid, SIGQUIT) != 0) {
      unlink(trigger.c_str());
      return Fail(absl::StrCat("cannot signal process ", pid, ": ", std::strerror(errno)), 1);
    }
    while ((fd = Connect(socket_path)) < 0) {
      if (Clock::now() >= deadline) {
        if (made) unlink(trigger.c_str());
        if (kill(pid, 0) != 0 && errno == ESRCH) {
          return Fail(absl::StrCat("process ", pid, " ended"), 1);
        }
        return Fail(absl::StrCat("process ", pid, " did not answer within ", kTimeout.count(),
                                 " s (is it a minivm VM?)"),
                    1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // Send, then read the reply within what is left of the 10 s. A send error
  // is not fatal: the VM may have refused and closed, and its reply says why.
  if (minivm::attach::SendAll(fd, request, deadline) == IoResult::kTimedOut) {
    close(fd);
    return Fail(absl::StrCat("process ", pid, " did not answer within ", kTimeout.count(), " s"),
                1);
  }
  char head[12];
  const IoResult got = minivm::attach::ReadExactly(fd, head, sizeof head, deadline);
  if (got == IoResult::kTimedOut) {
    close(fd);
    return Fail(absl::StrCat("process ", pid, " did not answer within ", kTimeout.count(), " s"),
                1);
  }
  const uint32_t status = minivm::attach::GetU32(reinterpret_cast<unsigned char*>(head + 4));
  const uint32_t size = minivm::attach::GetU32(reinterpret_cast<unsigned char*>(head + 8));
  if (got != IoResult::kDone || std::memcmp(head, minivm::attach::kMagic, 4) != 0 ||
      status > minivm::attach::kStatusError || size > minivm::attach::kMaxReplyBytes) {
    close(fd);
    return Fail(absl::StrCat("process ", pid, " sent no valid minivm attach reply"), 1);
  }
  std::string text(size, '\0');
  const IoResult body = minivm::attach::ReadExactly(fd, text.data(), size, deadline);
  close(fd);
  if (body != IoResult::kDone) {
    return Fail(absl::StrCat("process ", pid,
                             body == IoResult::kTimedOut ? " did not finish its reply within 10 s"
                                                         : " sent an incomplete reply"),
                1);
  }
  if (status != minivm::attach::kStatusOk) return Fail(text, 1);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    return Fail(absl::StrCat("cannot write the answer: ", std::strerror(errno)), 1);
  }
  return 0;
}
