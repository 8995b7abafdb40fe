// minivm-attach PID COMMAND [ARGUMENT]: talks to a running minivm VM
// through its attach listener (docs/attach.md, docs/tools.md).
//
// Exit codes (../shared/spec/vmti.md, "Attaching to a running VM"): 0 the
// VM answered and did it; 1 a dead PID, a process that is not a minivm VM,
// no answer within 10 s, a VM that refuses, an agent whose Agent_OnAttach
// failed; 2 bad usage. Errors are one line on stderr.
//
// Steps (docs/attach.md, "Threat model"): the VM's user is the owner of
// /proc/PID. Its folder, if there, must be a real folder of that user (or
// root) with mode 0700, and a socket file in it a socket of that user; a
// listener on it must be process PID running as that user (SO_PEERCRED).
// If it answers, use it. Otherwise signal only a process marked as a
// minivm VM (a thread named attach::kMarkerThreadName, SIGQUIT blocked in
// every other thread; to any other process the signal could be fatal), after
// creating the trigger file (only the client that creates it sends the
// signal, so two clients attaching at once never send a SIGQUIT the VM
// would take for Ctrl-\), and wait for the socket. Whatever the VM or an
// agent sends is printed with its control characters escaped.
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
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "vm/runtime/attach_protocol.h"

namespace {

using minivm::attach::Clock;
using minivm::attach::IoResult;
using minivm::attach::IsAttachableVm;
using minivm::attach::ProcessEnded;
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
  // One line, whatever the VM sent, with no control character.
  std::string line = absl::StrReplaceAll(
      minivm::attach::EscapeForTerminal(std::string(absl::StripTrailingAsciiWhitespace(message))),
      {{"\n", "; "}, {"\t", " "}});
  std::fprintf(stderr, "minivm-attach: error: %s\n", line.c_str());
  return code;
}

int Usage(const std::string& message) {
  return Fail(absl::StrCat(message, " (usage: minivm-attach PID COMMAND [ARGUMENT]; ",
                           "minivm-attach --help lists the commands)"),
              2);
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

// The VM's private folder as the client finds it. Only a real folder (not
// a symlink) of the VM's user (or root) with no access for group or others
// is safe: anyone else who made it first could put a listener there.
enum class DirectoryState { kMissing, kSafe, kUnsafe };

DirectoryState CheckDirectory(uid_t vm_uid, std::string* error) {
  const std::string dir = minivm::attach::AttachDirectory(vm_uid);
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return DirectoryState::kMissing;
    *error = absl::StrCat("cannot check ", dir, ": ", std::strerror(errno));
    return DirectoryState::kUnsafe;
  }
  if (!S_ISDIR(st.st_mode)) {
    *error = absl::StrCat("refusing ", dir, ": not a folder",
                          S_ISLNK(st.st_mode) ? " (a symbolic link)" : "");
  } else if (st.st_uid != vm_uid && st.st_uid != 0) {
    *error = absl::StrCat("refusing ", dir, ": owned by user ", st.st_uid, ", not by user ", vm_uid,
                          " (the VM's) or root");
  } else if ((st.st_mode & 077) != 0) {
    *error = absl::StrFormat("refusing %s: mode %04o, not 0700", dir, st.st_mode & 07777);
  } else {
    return DirectoryState::kSafe;
  }
  return DirectoryState::kUnsafe;
}

enum class ConnectResult { kConnected, kNotListening, kRefuse };

// Connects to the VM's socket in its checked folder. kNotListening: no
// socket file, or nobody listening on it (a stale file). kRefuse, with the
// reason: the file is not a socket of the VM's user, or the listener is not
// process `pid` running as `vm_uid` (SO_PEERCRED); nothing was sent.
ConnectResult ConnectToVm(const std::string& path, pid_t pid, uid_t vm_uid, int* fd_out,
                          std::string* error) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return ConnectResult::kNotListening;
  if (!S_ISSOCK(st.st_mode) || st.st_uid != vm_uid) {
    *error = absl::StrCat("refusing ", path, ": not a socket of user ", vm_uid);
    return ConnectResult::kRefuse;
  }
  const int fd = Connect(path);
  if (fd < 0) return ConnectResult::kNotListening;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) {
    *error = absl::StrCat("cannot read the credentials of the listener on ", path, ": ",
                          std::strerror(errno));
  } else if (cred.pid != pid) {
    *error = absl::StrCat("refusing the listener on ", path, ": it is process ", cred.pid, ", not ",
                          pid);
  } else if (cred.uid != vm_uid) {
    *error = absl::StrCat("refusing the listener on ", path, ": it runs as user ", cred.uid,
                          ", not ", vm_uid);
  } else {
    *fd_out = fd;
    return ConnectResult::kConnected;
  }
  close(fd);
  return ConnectResult::kRefuse;
}

// Removes the socket and trigger files of a process that has ended (or
// whose pid now names another program), in a folder that passes
// CheckDirectory; files this client may not remove stay.
void RemoveStaleFiles(uid_t uid, pid_t pid) {
  std::string ignored;
  if (CheckDirectory(uid, &ignored) != DirectoryState::kSafe) return;
  for (const std::string& path :
       {minivm::attach::SocketPath(uid, pid), minivm::attach::TriggerPath(uid, pid)}) {
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && (S_ISSOCK(st.st_mode) || S_ISREG(st.st_mode))) {
      unlink(path.c_str());
    }
  }
}

// After the VM closed the connection without a whole reply: true if it is
// ending. A VM removes its socket file before it _exits, so the file is
// gone by the time the connection closes; a VM killed outright ends
// without removing it, and is waited for (at most until `deadline`).
bool VmEnding(pid_t pid, const std::string& socket_path, Clock::time_point deadline) {
  for (;;) {
    struct stat st;
    if (ProcessEnded(pid) || lstat(socket_path.c_str(), &st) != 0) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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
  return CheckDirectory(vm_uid, error) == DirectoryState::kSafe;
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
  // The VM's uid (the owner of /proc/PID, its effective uid) names its
  // folder; the listener must run as it.
  struct stat proc_st;
  if (stat(absl::StrCat("/proc/", pid).c_str(), &proc_st) != 0 || ProcessEnded(pid)) {
    // A socket its VM left when it was killed goes now, if it is ours.
    RemoveStaleFiles(geteuid(), pid);
    return Fail(absl::StrCat("no process ", pid), 1);
  }
  const uid_t vm_uid = proc_st.st_uid;
  if (geteuid() != 0 && geteuid() != vm_uid) {
    return Fail(absl::StrCat("permission denied: process ", pid, " belongs to user ", vm_uid,
                             " (only that user and root can attach)"),
                1);
  }
  const std::string socket_path = minivm::attach::SocketPath(vm_uid, pid);
  std::string error;
  // Nothing is sent, and no signal, before the folder, the socket file and
  // the listener's credentials are known to be the VM's (docs/attach.md,
  // "Threat model").
  DirectoryState dir = CheckDirectory(vm_uid, &error);
  if (dir == DirectoryState::kUnsafe) return Fail(error, 1);
  int fd = -1;
  if (dir == DirectoryState::kSafe) {
    const ConnectResult r = ConnectToVm(socket_path, pid, vm_uid, &fd, &error);
    if (r == ConnectResult::kRefuse) return Fail(error, 1);
  }
  if (fd < 0) {
    // Not listening yet: only a process marked as a minivm VM gets SIGQUIT.
    std::string why;
    bool marked = false;
    if (!IsAttachableVm(pid, &why, &marked)) {
      if (ProcessEnded(pid)) {
        RemoveStaleFiles(vm_uid, pid);
        return Fail(absl::StrCat("no process ", pid), 1);
      }
      // Without the mark the pid is no VM's (a VM is marked before it
      // listens): a file there is a dead VM's whose pid was reused.
      if (dir == DirectoryState::kSafe && !marked) RemoveStaleFiles(vm_uid, pid);
      return Fail(absl::StrCat("process ", pid, " is not a minivm VM (", why,
                               "; it takes no attach requests)"),
                  1);
    }
    if (!PrepareDirectory(vm_uid, &error)) return Fail(error, 1);
    const std::string trigger = minivm::attach::TriggerPath(vm_uid, pid);
    bool made = false;
    if (!MakeTrigger(trigger, &error, &made)) return Fail(error, 1);
    if (made && kill(pid, SIGQUIT) != 0) {
      unlink(trigger.c_str());
      return Fail(absl::StrCat("cannot signal process ", pid, ": ", std::strerror(errno)), 1);
    }
    for (;;) {
      const ConnectResult r = ConnectToVm(socket_path, pid, vm_uid, &fd, &error);
      if (r == ConnectResult::kRefuse) {
        if (made) unlink(trigger.c_str());
        return Fail(error, 1);
      }
      if (r == ConnectResult::kConnected) break;
      if (Clock::now() >= deadline) {
        if (made) unlink(trigger.c_str());
        if (ProcessEnded(pid)) return Fail(absl::StrCat("process ", pid, " ended"), 1);
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
  // A `load` reply may be preceded by a kStatusLoading frame: the VM has
  // started loading the agent.
  bool loading = false;
  char head[12];
  uint32_t status = 0, size = 0;
  for (;;) {
    const IoResult got = minivm::attach::ReadExactly(fd, head, sizeof head, deadline);
    if (got == IoResult::kTimedOut) {
      close(fd);
      if (loading) {
        return Fail(absl::StrCat("process ", pid, " is still loading '", argument, "' after ",
                                 kTimeout.count(),
                                 " s: its Agent_OnAttach has not returned (if it returns 0, "
                                 "the agent is loaded, and the agents command lists it)"),
                    1);
      }
      return Fail(absl::StrCat("process ", pid, " did not answer within ", kTimeout.count(), " s"),
                  1);
    }
    status = minivm::attach::GetU32(reinterpret_cast<unsigned char*>(head + 4));
    size = minivm::attach::GetU32(reinterpret_cast<unsigned char*>(head + 8));
    if (got == IoResult::kClosed && VmEnding(pid, socket_path, deadline)) {
      close(fd);
      return Fail(absl::StrCat("process ", pid, " ended before it replied (the VM is ending)"), 1);
    }
    if (got != IoResult::kDone || std::memcmp(head, minivm::attach::kMagic, 4) != 0 ||
        size > minivm::attach::kMaxReplyBytes ||
        (status == minivm::attach::kStatusLoading && (size != 0 || loading || command != "load")) ||
        status > minivm::attach::kStatusLoading) {
      close(fd);
      return Fail(absl::StrCat("process ", pid, " sent no valid minivm attach reply"), 1);
    }
    if (status != minivm::attach::kStatusLoading) break;
    loading = true;
  }
  std::string text(size, '\0');
  const IoResult body = minivm::attach::ReadExactly(fd, text.data(), size, deadline);
  close(fd);
  if (body == IoResult::kClosed && VmEnding(pid, socket_path, deadline)) {
    return Fail(absl::StrCat("process ", pid, " ended before it replied (the VM is ending)"), 1);
  }
  if (body != IoResult::kDone) {
    return Fail(absl::StrCat("process ", pid,
                             body == IoResult::kTimedOut ? " did not finish its reply within 10 s"
                                                         : " sent an incomplete reply"),
                1);
  }
  if (status != minivm::attach::kStatusOk) return Fail(text, 1);
  const std::string shown = minivm::attach::EscapeForTerminal(text);
  std::fwrite(shown.data(), 1, shown.size(), stdout);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    return Fail(absl::StrCat("cannot write the answer: ", std::strerror(errno)), 1);
  }
  return 0;
}
