#include "collector.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "../agents/common/output.h"
#include "socket_util.h"

namespace collector {
namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Log(const std::string& line) {
  std::fprintf(stderr, "minivm-collector: %s\n", line.c_str());
  std::fflush(stderr);
}

std::string U(uint64_t v) { return std::to_string(v); }

// The answer to a hello, without the fields only one kind of answer has
// (reason, ring_bytes).
Welcome WelcomeFor(uint32_t connection, uint32_t status) {
  Welcome w;
  std::memset(&w, 0, sizeof w);
  w.magic = kMagic;
  w.version = kVersion;
  w.status = status;
  w.connection = connection;
  return w;
}

}  // namespace

Collector::Collector(CollectorOptions options) : options_(std::move(options)) {}

Collector::~Collector() {
  for (auto& c : clients_) CloseClient(c.get());
  if (listen_fd_ >= 0) close(listen_fd_);
  if (signal_fd_ >= 0) close(signal_fd_);
  if (bound_) unlink(options_.socket_path.c_str());
}

void Collector::BlockSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // sends use MSG_NOSIGNAL; this covers the rest
}

bool Collector::Start(std::string* error) {
  sockaddr_un addr;
  if (!UnixAddress(options_.socket_path, &addr, error)) return false;
  struct stat st;
  if (stat(options_.out_dir.c_str(), &st) != 0) {
    if (mkdir(options_.out_dir.c_str(), 0755) != 0) {
      *error = "cannot create output directory " + options_.out_dir + ": " + std::strerror(errno);
      return false;
    }
  } else if (!S_ISDIR(st.st_mode)) {
    *error = "output path " + options_.out_dir + " is not a directory";
    return false;
  }
  if (access(options_.out_dir.c_str(), W_OK) != 0) {
    *error = "cannot write to output directory " + options_.out_dir + ": " + std::strerror(errno);
    return false;
  }
  // A socket file left by a collector that died is replaced; one that a
  // live collector answers on is not.
  if (lstat(options_.socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *error = options_.socket_path + " exists and is not a socket";
      return false;
    }
    int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (probe >= 0) close(probe);
    if (live) {
      *error = "another collector is listening on " + options_.socket_path;
      return false;
    }
    unlink(options_.socket_path.c_str());
  }
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = "cannot bind " + options_.socket_path + ": " + std::strerror(errno);
    return false;
  }
  bound_ = true;
  if (listen(listen_fd_, 64) != 0) {
    *error = "cannot listen on " + options_.socket_path + ": " + std::strerror(errno);
    return false;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) {
    *error = std::string("signalfd: ") + std::strerror(errno);
    return false;
  }
  return true;
}

void Collector::CloseClient(Client* c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->reader.reset();
  c->ring.reset();
}

void Collector::Accept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        Log(std::string("accept: ") + std::strerror(errno));
      return;
    }
    auto c = std::make_unique<Client>();
    c->fd = fd;
    c->connection = next_connection_++;
    ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) c->pid = cred.pid;
    c->deadline_ns = NowNs() + int64_t{kHandshakeSeconds} * 1000000000;
    int64_t connected = 0;
    for (const auto& other : clients_) connected += other->fd >= 0;
    if (connected >= options_.max_clients) {
      c->refuse =
          "too many VMs connected (--max-clients=" + std::to_string(options_.max_clients) + ")";
    }
    clients_.push_back(std::move(c));
  }
}

void Collector::Refuse(Client* c, const std::string& reason) {
  Welcome w = WelcomeFor(c->connection, kRefused);
  std::snprintf(w.reason, sizeof w.reason, "%s", reason.c_str());
  SendMessage(c->fd, &w, sizeof w, -1, MSG_DONTWAIT);
  Log("connection " + U(c->connection) + " from pid " + std::to_string(c->pid) +
      " refused: " + reason);
  CloseClient(c);
}

void Collector::HandleHello(Client* c) {
  Hello h;
  std::memset(&h, 0, sizeof h);
  int fd = -1;
  bool truncated = false;
  ssize_t n = RecvMessage(c->fd, &h, sizeof h, MSG_DONTWAIT, &fd, &truncated);
  if (fd >= 0) close(fd);  // clients send no descriptors
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {
    Log("connection " + U(c->connection) + " from pid " + std::to_string(c->pid) +
        " closed before its hello");
    CloseClient(c);
    return;
  }
  if (!c->refuse.empty()) return Refuse(c, c->refuse);
  if (static_cast<size_t>(n) != sizeof h || truncated || h.magic != kMagic) {
    return Refuse(c, "not a minivm remote agent hello (" + std::to_string(n) + " bytes)");
  }
  if (h.version != kVersion) {
    return Refuse(c, "protocol version " + U(h.version) + ", this collector speaks " + U(kVersion));
  }
  if (h.interval < 0 || h.interval > INT32_MAX) {
    return Refuse(c, "bad sampling interval " + std::to_string(h.interval));
  }
  const uint64_t ring_bytes = h.ring_bytes == 0 ? options_.ring_bytes : h.ring_bytes;
  if (!ValidRingBytes(ring_bytes)) {
    return Refuse(c, "bad buffer size " + U(ring_bytes) + " (a power of two from " +
                         U(kMinRingBytes) + " to " + U(kMaxRingBytes) + ")");
  }
  std::string error;
  c->ring = SharedRing::Create(ring_bytes, &error);
  if (c->ring == nullptr) return Refuse(c, "cannot create the ring buffer: " + error);
  Welcome w = WelcomeFor(c->connection, kAccepted);
  w.ring_bytes = ring_bytes;
  if (SendMessage(c->fd, &w, sizeof w, c->ring->fd(), MSG_DONTWAIT) != sizeof w) {
    Log("connection " + U(c->connection) + ": cannot send the welcome: " + std::strerror(errno));
    CloseClient(c);
    return;
  }
  c->reader = std::make_unique<RingReader>(c->ring.get());
  c->session = std::make_unique<Session>(h.interval);
  c->active = true;
  Log("connection " + U(c->connection) + " from pid " + std::to_string(c->pid) + " (buffer " +
      U(ring_bytes) + " bytes, interval " + std::to_string(h.interval) + ")");
}

void Collector::ReadSocket(Client* c) {
  char buf[64];
  for (;;) {
    int fd = -1;
    bool truncated = false;
    ssize_t n = RecvMessage(c->fd, buf, sizeof buf, MSG_DONTWAIT, &fd, &truncated);
    if (fd >= 0) close(fd);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // end of file, or ECONNRESET: the VM is gone
      c->eof = true;
      return;
    }
    // Wake-up bytes need no action: draining follows every poll.
    if (n == 1 && buf[0] == kEndByte) c->got_end = true;
  }
}

void Collector::Drain(Client* c, int64_t budget, bool writer_gone) {
  if (!c->active || !c->error.empty()) return;
  c->reader->MarkBusy();
  uint16_t type;
  std::vector<uint8_t> payload;
  std::string error;
  c->more = false;
  // A ring holds at most ring_bytes / 8 records: a drain "to the end"
  // stops there even if the VM keeps writing as fast as we read.
  if (budget < 0) budget = static_cast<int64_t>(c->ring->ring_bytes() / kHeaderBytes);
  for (int64_t i = 0; i < budget; ++i) {
    switch (c->reader->Next(writer_gone, &type, &payload, &error)) {
      case RingReader::Status::kRecord:
        if (!c->session->Apply(type, payload.data(), payload.size(), &error)) {
          c->error = "malformed record at position " + U(c->reader->position()) + ": " + error;
          return;
        }
        continue;
      case RingReader::Status::kEmpty:
        return;
      case RingReader::Status::kCorrupt:
        c->error = "corrupt ring buffer: " + error;
        return;
    }
  }
  c->more = true;
}

void Collector::Dump(Client* c, const std::string& why, bool final) {
  const Meta* m = c->ring->meta();
  const SessionStats& s = c->session->stats();
  // The drop counters live in shared memory the VM writes: numbers to
  // report, nothing to rely on.
  const uint64_t dropped = m->dropped_records.load(std::memory_order_relaxed);
  const uint64_t dropped_samples = m->dropped_samples.load(std::memory_order_relaxed);
  std::vector<std::string> comments = {
      "minivm-collector: VM pid " + std::to_string(c->pid) + ", connection " + U(c->connection) +
          ", sampling interval " + std::to_string(c->session->interval()) + " bytes",
      "records received: " + U(s.records) + " (samples " + U(s.samples) + ", frees " + U(s.frees) +
          ", promotions " + U(s.promotes) + ")",
      "records dropped by the VM (ring buffer full): " + U(dropped) +
          " (samples lost: " + U(dropped_samples) + ")",
  };
  std::string name;
  if (final) {
    comments.push_back("final profile: " + why);
    name = "final";
  } else {
    char seq[16];
    std::snprintf(seq, sizeof seq, "%04d", ++c->dumps);
    comments.push_back("dump " + std::string(seq) + " (" + why + "), not final");
    name = seq;
  }
  const std::string path = options_.out_dir + "/heap." + std::to_string(c->pid) + "." +
                           U(c->connection) + "." + name + ".pb.gz";
  const std::string data = c->session->BuildProfile(comments);
  if (data.empty()) {
    Log("connection " + U(c->connection) + ": could not encode the profile");
    return;
  }
  std::string error;
  if (!agent::WriteOutput(path, data, &error)) {
    Log(error);
    return;
  }
  c->records_at_last_dump = s.records;
  c->dropped_at_last_dump = dropped;
  Log("wrote " + path + " (" + (final ? "final: " : "") + why + "; " + U(s.samples) + " samples, " +
      U(dropped) + " records dropped)");
}

void Collector::Finish(Client* c, const std::string& why) {
  Dump(c, why, /*final=*/true);
  CloseClient(c);
}

void Collector::HandleSignals(bool* stop, std::string* stop_reason) {
  signalfd_siginfo si;
  while (read(signal_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    if (si.ssi_signo == SIGUSR1) {
      for (auto& c : clients_) {
        if (c->fd < 0 || !c->active) continue;
        Drain(c.get(), -1, false);
        if (c->error.empty()) Dump(c.get(), "SIGUSR1", false);
      }
    } else {
      *stop = true;
      *stop_reason = si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM";
    }
  }
}

int Collector::Run() {
  Log("listening on " + options_.socket_path + ", writing profiles to " + options_.out_dir);
  const int64_t period_ns = static_cast<int64_t>(options_.period_seconds * 1e9);
  int64_t next_period = period_ns > 0 ? NowNs() + period_ns : INT64_MAX;
  bool stop = false;
  std::string stop_reason;
  std::vector<pollfd> fds;
  while (!stop) {
    // Clients that ended in the last pass are gone now.
    clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                  [](const std::unique_ptr<Client>& c) { return c->fd < 0; }),
                   clients_.end());
    int64_t now = NowNs();
    int64_t wake = std::min(next_period, now + int64_t{kTickMs} * 1000000);
    bool busy = false;
    for (auto& c : clients_) {
      if (!c->active) wake = std::min(wake, c->deadline_ns);
      if (c->active && c->more) busy = true;
    }
    if (!busy) {
      // Ask for wake-ups only now that we are about to sleep.
      for (auto& c : clients_) {
        if (c->active && !c->reader->PrepareToSleep()) busy = true;
      }
    }
    int timeout =
        busy ? 0 : static_cast<int>(std::max<int64_t>(0, (wake - now + 999999) / 1000000));
    fds.clear();
    fds.push_back({signal_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& c : clients_) fds.push_back({c->fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      Log(std::string("poll: ") + std::strerror(errno));
      return 1;
    }
    if (fds[0].revents != 0) HandleSignals(&stop, &stop_reason);
    if (fds[1].revents != 0) Accept();
    now = NowNs();
    // fds[2 + i] belongs to clients_[i] (Accept only appends).
    for (size_t i = 0; i + 2 < fds.size(); ++i) {
      Client* c = clients_[i].get();
      if (c->fd < 0) continue;
      if (!c->active) {
        if (fds[i + 2].revents != 0) {
          HandleHello(c);
        } else if (now > c->deadline_ns) {
          Log("connection " + U(c->connection) + " from pid " + std::to_string(c->pid) +
              ": no hello within " + std::to_string(kHandshakeSeconds) + " s");
          CloseClient(c);
        }
        continue;
      }
      if (fds[i + 2].revents != 0) ReadSocket(c);
    }
    for (auto& cp : clients_) {
      Client* c = cp.get();
      if (c->fd < 0 || !c->active) continue;
      Drain(c, c->eof ? -1 : kDrainBudget, c->eof);
      if (!c->error.empty()) {
        c->ring->meta()->shutting_down.store(1, std::memory_order_relaxed);
        Log("connection " + U(c->connection) + " from pid " + std::to_string(c->pid) + ": " +
            c->error);
        Finish(c, "connection dropped: " + c->error);
      } else if (c->eof) {
        std::string why;
        if (c->got_end) {
          why = "the VM exited";
        } else {
          why = "the VM died (connection closed without an end message)";
        }
        if (c->reader->torn_records() > 0 || c->reader->unreadable_bytes() > 0) {
          why += "; died mid-record: " + U(c->reader->torn_records()) +
                 " torn records discarded, " + U(c->reader->unreadable_bytes()) +
                 " bytes unreadable";
        }
        Finish(c, why);
      }
    }
    if (NowNs() >= next_period) {
      for (auto& c : clients_) {
        if (c->fd < 0 || !c->active) continue;
        const uint64_t dropped = c->ring->meta()->dropped_records.load(std::memory_order_relaxed);
        if (c->session->stats().records != c->records_at_last_dump ||
            dropped != c->dropped_at_last_dump) {
          Dump(c.get(), "periodic", false);
        }
      }
      next_period = NowNs() + period_ns;
    }
  }
  for (auto& c : clients_) {
    if (c->fd < 0) continue;
    if (c->active) {
      Drain(c.get(), -1, false);
      c->ring->meta()->shutting_down.store(1, std::memory_order_relaxed);
      Finish(c.get(), "the collector stopped (" + stop_reason + ") while the VM was running" +
                          (c->error.empty() ? "" : "; " + c->error));
    } else {
      CloseClient(c.get());
    }
  }
  Log("stopped (" + stop_reason + ")");
  return 0;
}

}  // namespace collector
