// minivm-collector: receives heap samples from VMs running the remote agent
// (-agentlib:remote=socket=PATH) over shared memory and writes one pprof
// heap profile per VM. docs/collector.md.
//
//   minivm-collector --socket=PATH --out=DIR [--period=SECONDS]
//                    [--buffer=BYTES] [--max-clients=N]
//                    [--attach=PID[,PID...]] [--attach-options=OPTIONS]
//
// --attach (heapprofd's hand-off for running VMs): once listening, the
// collector runs `minivm-attach PID load remote=socket=SOCKET[,OPTIONS]`
// (the minivm-attach beside this executable, else the one on PATH) for each
// PID, all at once, on a helper thread that only starts them and logs how
// each ended; the VM's remote agent then connects back as one started with
// -agentlib:remote does, and everything else is the same (docs/collector.md).
//
// The command line is parsed by hand with the agents' option helpers
// (examples/agents/common/options.h) rather than absl::flags: five options,
// and errors must be one line naming the option, like the agents'.
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../agents/common/options.h"
#include "collector.h"

namespace {

constexpr const char* kUsage =
    "usage: minivm-collector --socket=PATH --out=DIR [--period=SECONDS] [--buffer=BYTES] "
    "[--max-clients=N] [--attach=PID[,PID...]] [--attach-options=OPTIONS]\n";

extern "C" char** environ;

// minivm-attach beside this executable (a build tree's bin/, an installed
// bin/), else by name on PATH.
std::string AttachTool() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    std::string dir(buf, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    const std::string beside = dir + "/minivm-attach";
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
  return "minivm-attach";
}

// Runs minivm-attach for one VM with its stderr on a pipe; logs one line
// saying how it went.
void AttachOne(const std::string& tool, const std::string& pid, const std::string& spec) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "minivm-collector: cannot attach to pid %s: pipe: %s\n", pid.c_str(),
                 std::strerror(errno));
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The collector blocks its signals for the signalfd; the child must not
  // inherit that.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> args = {tool, pid, "load", spec};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = 0;
  const int err = posix_spawnp(&child, tool.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0 && output.size() < 65536) output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (err != 0) {
    std::fprintf(stderr, "minivm-collector: cannot attach to pid %s: cannot run %s: %s\n",
                 pid.c_str(), tool.c_str(), std::strerror(err));
    return;
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::fprintf(stderr, "minivm-collector: attached to pid %s\n", pid.c_str());
    return;
  }
  // minivm-attach's own one-line error is its last line.
  while (!output.empty() && output.back() == '\n') output.pop_back();
  const size_t nl = output.rfind('\n');
  std::string why = nl == std::string::npos ? output : output.substr(nl + 1);
  const std::string prefix = "minivm-attach: error: ";
  if (why.compare(0, prefix.size(), prefix) == 0) why = why.substr(prefix.size());
  if (why.empty()) why = "minivm-attach failed";
  std::fprintf(stderr, "minivm-collector: cannot attach to pid %s: %s\n", pid.c_str(), why.c_str());
}

int Bad(const std::string& arg, const char* why) {
  std::fprintf(stderr, "minivm-collector: bad argument '%s': %s\n", arg.c_str(), why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  collector::CollectorOptions o;
  std::vector<std::string> attach_pids;
  std::string attach_options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (eq == std::string::npos) return Bad(arg, "want --name=value (see --help)");
    if (key == "--socket") {
      if (value.empty()) return Bad(arg, "want a socket path");
      o.socket_path = value;
    } else if (key == "--out") {
      if (value.empty()) return Bad(arg, "want a directory");
      o.out_dir = value;
    } else if (key == "--period") {
      if (!agent::ParseDouble(value, 0.001, 86400.0 * 365, &o.period_seconds)) {
        return Bad(arg, "want seconds > 0, e.g. 10 or 0.5");
      }
    } else if (key == "--buffer") {
      int64_t bytes = 0;
      if (!agent::ParseBytes(value, 0, INT64_MAX, &bytes) ||
          !collector::ValidRingBytes(static_cast<uint64_t>(bytes))) {
        return Bad(arg, "want a power of two from 4k to 256m");
      }
      o.ring_bytes = static_cast<uint64_t>(bytes);
    } else if (key == "--max-clients") {
      if (!agent::ParseInt(value, 1, 1000, &o.max_clients)) {
        return Bad(arg, "want a count from 1 to 1000");
      }
    } else if (key == "--attach") {
      size_t start = 0;
      for (;;) {
        const size_t comma = value.find(',', start);
        const std::string pid = value.substr(start, comma - start);
        int64_t v = 0;
        if (!agent::ParseInt(pid, 1, INT_MAX, &v))
          return Bad(arg, "want process ids, e.g. 4242,4243");
        attach_pids.push_back(pid);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (key == "--attach-options") {
      if (value.find("socket=") != std::string::npos) {
        return Bad(arg, "socket= is the collector's own --socket");
      }
      attach_options = value;
    } else {
      return Bad(arg,
                 "unknown option (known: --socket, --out, --period, --buffer, --max-clients, "
                 "--attach, --attach-options)");
    }
  }
  if (o.socket_path.empty() || o.out_dir.empty()) {
    std::fprintf(stderr, "minivm-collector: --socket and --out are required (see --help)\n");
    return 2;
  }
  // Before any thread exists, so that every thread inherits the mask and the
  // signals reach only the signalfd.
  collector::Collector::BlockSignals();
  collector::Collector c(o);
  std::string error;
  if (!c.Start(&error)) {
    std::fprintf(stderr, "minivm-collector: %s\n", error.c_str());
    return 1;
  }
  if (!attach_pids.empty()) {
    // The VMs' agents connect to this path from their own working folders.
    std::string socket = o.socket_path;
    if (socket[0] != '/') {
      char cwd[PATH_MAX];
      if (getcwd(cwd, sizeof cwd) != nullptr) socket = std::string(cwd) + "/" + socket;
    }
    const std::string spec =
        "remote=socket=" + socket + (attach_options.empty() ? "" : "," + attach_options);
    const std::string tool = AttachTool();
    // Each minivm-attach waits for its VM's Agent_OnAttach, which waits for
    // this collector's handshake: they run beside the loop, never before it.
    std::thread([tool, spec, attach_pids] {
      std::vector<std::thread> each;
      for (const std::string& pid : attach_pids) each.emplace_back(AttachOne, tool, pid, spec);
      for (std::thread& t : each) t.join();
    }).detach();
  }
  return c.Run();
}
