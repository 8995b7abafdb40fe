#include "agent_api/attach_host.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "agent_api/agent_loader.h"
#include "gc/sampler.h"

namespace minivm::agent {
namespace {

void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Runs fn with file descriptor 2 on a pipe, and returns what was written to
// it, which also goes on, as it arrives, to the real stderr: an agent's
// messages still reach the VM's terminal or log, and the client gets them
// too. Other threads' writes to stderr in that window take the same way
// (nothing is lost unless the process ends in the middle of it).
// The VM's real stderr while TeeStderr has a pipe on descriptor 2 (else
// -1), and whether its reader has copied everything (the pipe's write ends
// are all closed), for AttachHost::BeforeExit. The VM may end while an
// Agent_OnAttach runs (it holds no lock VM death needs), and its last
// words on stderr must not be left in the pipe. Both guarded by g_tee_mu.
std::mutex g_tee_mu;
int g_tee_saved = -1;
std::atomic<bool>* g_tee_drained = nullptr;

template <typename F>
std::string TeeStderr(F&& fn) {
  int fds[2];
  std::fflush(stderr);
  const int saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (saved < 0 || pipe2(fds, O_CLOEXEC) != 0) {
    if (saved >= 0) close(saved);
    fn();
    return "";
  }
  std::string captured;
  std::atomic<bool> done{false};
  std::atomic<bool> drained{false};
  {
    std::lock_guard<std::mutex> lock(g_tee_mu);
    dup2(fds[1], 2);
    g_tee_saved = saved;
    g_tee_drained = &drained;
  }
  close(fds[1]);
  std::thread reader([&] {
    char buf[4096];
    for (;;) {
      pollfd p{fds[0], POLLIN, 0};
      const int ready = poll(&p, 1, 100);
      if (ready == 0) {
        // A copy of the write end the agent passed on (a child process)
        // would keep the pipe open for ever: stop once fn has returned.
        if (done.load()) break;
        continue;
      }
      if (ready < 0) {
        if (errno == EINTR) continue;
        break;
      }
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      WriteAll(saved, buf, static_cast<size_t>(n));
      if (captured.size() < (64 << 10)) captured.append(buf, static_cast<size_t>(n));
    }
    drained.store(true);
  });
  fn();
  {
    std::lock_guard<std::mutex> lock(g_tee_mu);
    // BeforeExit may have put stderr back already.
    if (g_tee_saved >= 0) {
      std::fflush(stderr);
      dup2(saved, 2);  // closes the pipe's last write end we hold: the reader sees EOF
    }
    g_tee_saved = -1;
    g_tee_drained = nullptr;
  }
  done.store(true);
  reader.join();
  close(saved);
  close(fds[0]);
  return captured;
}

std::string LastLine(absl::string_view text) {
  text = absl::StripTrailingAsciiWhitespace(text);
  const size_t nl = text.rfind('\n');
  if (nl != absl::string_view::npos) text = text.substr(nl + 1);
  return std::string(text);
}

}  // namespace

bool AttachHost::LoadAgent(std::string_view spec_text, std::string* reply) {
  const absl::string_view spec(spec_text.data(), spec_text.size());
  const absl::string_view target = spec.substr(0, spec.find('='));
  // The same parser as the command line: a path with a '/', else a name.
  const std::string option = absl::StrCat(
      target.find('/') != absl::string_view::npos ? "-agentpath:" : "-agentlib:", spec);
  absl::StatusOr<AgentSpec> parsed = ParseAgentOption(option, AgentSearchPath());
  if (!parsed.ok()) {
    *reply = std::string(parsed.status().message());
    return false;
  }
  if (tools_ == nullptr) {
    auto made = std::make_unique<ToolInterface>();
    if (!made->AttachLive(vm_)) {
      *reply = "the VM is ending";
      return false;
    }
    owned_ = std::move(made);
    tools_ = owned_.get();
  }
  absl::StatusOr<vmtiInt> rc = absl::InternalError("not run");
  const std::string captured = TeeStderr([&] { rc = tools_->AttachAgent(*parsed); });
  if (!rc.ok()) {
    *reply = std::string(rc.status().message());
    return false;
  }
  if (*rc != 0) {
    const std::string why = LastLine(captured);
    *reply = absl::StrCat("agent '", parsed->path, "' failed to attach: Agent_OnAttach returned ",
                          *rc, why.empty() ? "" : ": ", why);
    return false;
  }
  *reply = captured;
  if (!reply->empty() && reply->back() != '\n') *reply += '\n';
  absl::StrAppend(reply, "agent '", parsed->path, "': Agent_OnAttach returned 0\n");
  return true;
}

void AttachHost::BeforeExit() {
  // Held to the end: the loading thread must not close `saved` meanwhile.
  std::lock_guard<std::mutex> lock(g_tee_mu);
  if (g_tee_saved < 0) return;
  std::fflush(stderr);
  dup2(g_tee_saved, 2);
  g_tee_saved = -1;
  // The reader sees the end of the pipe once no write end is left (an
  // agent's child process may keep one: hence the limit).
  for (int i = 0; i < 100 && !g_tee_drained->load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string AttachHost::DescribeAgents() {
  if (tools_ == nullptr) return "no agents loaded\n";
  return tools_->DescribeAgents();
}

std::string AttachHost::DescribeSampling() {
  if (tools_ == nullptr) {
    return absl::StrCat("sampling: off (no agent loaded); interval ", gc::kDefaultSamplingInterval,
                        " bytes, the default\n");
  }
  return tools_->DescribeSampling();
}

}  // namespace minivm::agent
