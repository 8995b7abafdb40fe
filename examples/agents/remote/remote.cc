/*
 * remote: the thin agent of minivm's out-of-process heap profiler. It sends
 * each sampled allocation, free and promotion as a small record through a
 * shared-memory ring buffer to minivm-collector, which keeps the books and
 * writes the profiles (docs/collector.md).
 *
 *   minivm-collector --socket=/tmp/mc.sock --out=profiles &
 *   minivm -agentlib:remote=socket=/tmp/mc.sock prog.mv
 *
 * Options (comma separated):
 *   socket=PATH      the collector's socket (required)
 *   interval=BYTES   mean sampling interval (e.g. 4096, 512k); default: the
 *                    VM's
 *   depth=N          frames per stack (default 64, at most 1024)
 *   buffer=BYTES     ask for a ring buffer of this size (a power of two
 *                    from 4k to 256m); default the collector's
 *   threads=A+B      sample only these threads; A+ also the threads A
 *                    spawns, directly or not (common/thread_filter.h)
 *   gc=1|0           collect the whole heap at VM death before the final
 *                    records, so that the final profile's in-use data is
 *                    what the program still held (default 1; docs/tools.md,
 *                    "Live means live")
 *
 * Design:
 * .connect  Connect at load: a VM told to report to a collector that is not
 *     there stops before the program starts (exit 1, one line), like any
 *     agent with a bad option. The handshake has 5-second time-outs.
 * .per-sample  Per sample, on the allocating thread: the sample info, the stack as
 *     (method id, location) pairs, a tag; one kAlloc record. Names are
 *     resolved here (only a VM thread may ask) but sent once each: a kMethod
 *     per method, a kLine per (method, location), a kClass per class, a
 *     kThread per thread, each written before the first record that uses
 *     it, and marked sent only once written (so a name lost to a full buffer
 *     is sent again by the next sample that needs it; a sample whose names
 *     did not fit is dropped whole). A per-thread direct-mapped cache of
 *     sent keys keeps the shared set's mutex off the common path.
 * .never-block  Never block on the collector: a full ring drops the record and counts
 *     it in shared memory (the collector puts the counts in the profile); a
 *     sample's object is untagged if its record was dropped, so no free or
 *     promotion follows. The wake-up byte is a non-blocking send, made only
 *     when the collector has marked itself idle (ring_buffer.h .wake-ups).
 * .collector-death  Collector death: a monitor thread waits (poll, no timer) on the
 *     socket; end-of-file or an error there, or EPIPE on a wake-up send,
 *     means the collector is gone. The agent then prints one line, the next
 *     callback on a VM thread disables its events, and the program runs on.
 * .vm-death  VM death: events off, the monitor joined, kEndByte sent (so the
 *     collector's final profile says the VM exited rather than died), the
 *     socket closed. The mapping stays until the process ends.
 * .threads  Callbacks arrive on several threads at once: the ring's writer side is
 *     lock-free (CAS reservation), counters are atomics, the sent set is
 *     behind a mutex that no VMTI call is made under.
 */
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>

#include "../common/agent.h"
#include "../common/errors.h"
#include "../common/options.h"
#include "../common/program.h"
#include "../common/sites.h"
#include "../common/thread_filter.h"
#include "protocol.h"
#include "ring_buffer.h"
#include "socket_util.h"
#include "vmti/vmti.h"

namespace remote {
namespace {

constexpr const char* kName = "remote";
constexpr int kMaxDepth = 1024;
constexpr int kHandshakeSeconds = 5;

struct Config {
  std::string socket;
  int64_t interval = -1;  // -1: the VM's
  int64_t depth = 64;
  int64_t buffer = 0;  // 0: the collector's default
  std::string threads;  // empty: every thread
  bool gc = true;
};

// A key of the sent set: (method, location) for a line, (method,
// kMethodKey) for a method's names, (class, kClassKey) for a class name.
// Locations are bytecode offsets (>= 0), so the markers cannot collide.
constexpr int64_t kMethodKey = INT64_MIN;
constexpr int64_t kClassKey = INT64_MIN + 1;
struct Key {
  uint64_t a;
  int64_t b;
  bool operator==(const Key& o) const { return a == o.a && b == o.b; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return static_cast<size_t>(
        (k.a ^ static_cast<uint64_t>(k.b) * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull >> 16);
  }
};

// Per-thread cache of keys known to be sent (.per-sample). Trivially
// destructible, zero-initialised: a = 0 is empty (handles are never null).
constexpr int kCacheBits = 9;
thread_local Key tl_sent_cache[1 << kCacheBits];
thread_local uint32_t tl_thread_id = 0;  // 0: not assigned
thread_local bool tl_thread_sent = false;

Key& CacheSlot(const Key& k) { return tl_sent_cache[KeyHash()(k) & ((1u << kCacheBits) - 1)]; }

// The handshake (protocol.h). Returns the connected socket and the mapped
// ring, or -1 after printing one line.
int Connect(const Config& c, int64_t interval, std::unique_ptr<collector::SharedRing>* ring,
            uint32_t* connection) {
  sockaddr_un addr;
  std::string error;
  collector::UnixAddress(c.socket, &addr, &error);
  int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (sock < 0 || !collector::SetSocketTimeouts(sock, kHandshakeSeconds) ||
      connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "remote: cannot connect to the collector at %s: %s\n", c.socket.c_str(),
                 std::strerror(errno));
    if (sock >= 0) close(sock);
    return -1;
  }
  collector::Hello hello;
  std::memset(&hello, 0, sizeof hello);
  hello.magic = collector::kMagic;
  hello.version = collector::kVersion;
  hello.pid = static_cast<uint32_t>(getpid());
  hello.interval = interval;
  hello.ring_bytes = static_cast<uint64_t>(c.buffer);
  collector::Welcome w;
  std::memset(&w, 0, sizeof w);
  int fd = -1;
  bool truncated = false;
  ssize_t n = -1;
  if (collector::SendMessage(sock, &hello, sizeof hello, -1, 0) == sizeof hello) {
    n = collector::RecvMessage(sock, &w, sizeof w, 0, &fd, &truncated);
  }
  if (n != sizeof w || truncated || w.magic != collector::kMagic) {
    std::fprintf(stderr, "remote: no valid answer from the collector at %s: %s\n", c.socket.c_str(),
                 n < 0 ? std::strerror(errno) : "bad welcome message");
  } else if (w.status != collector::kAccepted || fd < 0) {
    w.reason[sizeof w.reason - 1] = '\0';
    std::fprintf(stderr, "remote: the collector at %s refused the connection: %s\n",
                 c.socket.c_str(), w.reason);
  } else {
    *ring = collector::SharedRing::Attach(fd, w.ring_bytes, &error);
    fd = -1;  // Attach owns it
    if (*ring != nullptr) {
      *connection = w.connection;
      return sock;
    }
    std::fprintf(stderr, "remote: bad shared memory from the collector at %s: %s\n",
                 c.socket.c_str(), error.c_str());
  }
  if (fd >= 0) close(fd);
  close(sock);
  return -1;
}

class Remote {
 public:
  static constexpr const char* kName = remote::kName;
  using Config = remote::Config;

  // The instance's side of agent::Start (common/agent.h).
  static void DeclareOptions(Config* c, agent::OptionParser* p) {
    p->Text("socket", &c->socket, "the collector's socket path", [](const std::string& v) {
      std::string error;
      sockaddr_un addr;
      return collector::UnixAddress(v, &addr, &error) ? std::string() : error;
    });
    p->Interval(&c->interval);
    p->Depth(&c->depth, kMaxDepth);
    p->Custom("buffer", "a power of two from 4k to 256m", [c](const std::string& v) {
      return agent::ParseBytes(v, 0, INT64_MAX, &c->buffer) &&
             collector::ValidRingBytes(static_cast<uint64_t>(c->buffer));
    });
    agent::DeclareThreadsOption(p, &c->threads);
    p->Choice<bool>("gc", &c->gc, {{"1", true}, {"0", false}});
    p->Require("socket", "socket=PATH (the collector's socket)");
  }

  // Connects to the collector (.connect); null after one line on
  // stderr.
  static std::unique_ptr<Remote> Create(Config c, vmtiVM*, vmtiEnv* env) {
    // One connection per process: a second -agentlib:remote would share
    // this library's globals (dlopen returns the same handle), among them
    // the per-thread caches of what was sent.
    static std::atomic<bool> loaded{false};
    if (loaded.exchange(true)) {
      std::fprintf(stderr, "remote: loaded twice; one remote agent per VM\n");
      return nullptr;
    }
    // The collector is told the interval in force: ours (Install sets it
    // next), else the VM's.
    vmtiInt interval = static_cast<vmtiInt>(c.interval);
    if (c.interval < 0) {
      agent::ErrorLog log(kName);
      if (!log.Check(env, (*env)->GetHeapSamplingInterval(env, &interval),
                     "GetHeapSamplingInterval")) {
        return nullptr;
      }
    }
    std::unique_ptr<collector::SharedRing> ring;
    uint32_t connection = 0;
    const int sock = Connect(c, interval, &ring, &connection);
    if (sock < 0) return nullptr;
    return std::make_unique<Remote>(std::move(c), sock, std::move(ring), connection);
  }

  Remote(Config c, int sock, std::unique_ptr<collector::SharedRing> ring, uint32_t connection)
      : config_(std::move(c)),
        log_(kName),
        sock_(sock),
        ring_(std::move(ring)),
        writer_(ring_.get()),
        connection_(connection) {
    if (!config_.threads.empty()) threads_.Parse(config_.threads);  // validated already
  }

  // Handlers: OnStart, OnThreadStart, OnSample, OnObjectFree,
  // OnObjectPromote, OnVMDeath (common/agent.h).
  void Configure(agent::Setup* setup) const {
    setup->interval = config_.interval;
    threads_.Configure(setup);
  }

  agent::ErrorLog& log() { return log_; }

  // threads=: the event is enabled per thread, when each starts.
  void OnThreadStart(vmtiEnv* env, vmtiThread thread) {
    if (closed_.load(std::memory_order_acquire) || lost_.load(std::memory_order_acquire)) return;
    threads_.EnableSamplingIfSelected(env, thread, &log_);
  }

  // At VMInit (common/agent.h).
  // main_thread is null when attached (agent::Attach has passed every
  // running thread to OnThreadStart already).
  void OnStart(vmtiEnv* env, vmtiThread main_thread) {
    if (!config_.threads.empty() && main_thread != nullptr) OnThreadStart(env, main_thread);
    stop_fd_ = eventfd(0, EFD_CLOEXEC);
    if (stop_fd_ < 0) {
      std::fprintf(stderr, "remote: eventfd: %s; not watching for the collector's death\n",
                   std::strerror(errno));
      return;
    }
    // The monitor takes no signals meant for the program.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    monitor_ = std::thread([this] { MonitorLoop(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void OnSample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                vmtiLong size) {
    if (Stopped(env)) return;
    vmtiSampleInfo info;
    if (!log_.Check(env, (*env)->GetSampleInfo(env, &info), "GetSampleInfo")) return;
    vmtiFrameInfo frames[kMaxDepth];
    vmtiInt count = 0;
    if (!log_.Check(env,
                    (*env)->GetStackTrace(env, nullptr, 0, static_cast<vmtiInt>(config_.depth),
                                          frames, &count),
                    "GetStackTrace")) {
      count = 0;
    }
    // Names first (.per-sample): any that does not fit drops the sample.
    bool names_ok = EnsureThread(env, thread) && EnsureClass(env, klass);
    for (vmtiInt i = 0; names_ok && i < count; ++i) {
      names_ok = EnsureMethod(env, frames[i].method) &&
                 EnsureLine(env, frames[i].method, frames[i].location);
    }
    if (!names_ok) {
      writer_.CountDroppedSample();
      return;
    }
    // The tag is set before the record is reserved: between reserve and
    // commit no VMTI call is made (ring_buffer.h .writers).
    int64_t tag = next_tag_.fetch_add(1, std::memory_order_relaxed);
    if (!log_.Check(env, (*env)->SetTag(env, object, tag), "SetTag")) tag = 0;
    collector::RingWriter::Slot slot;
    const uint64_t bytes = sizeof(collector::AllocRecord) +
                           static_cast<uint64_t>(count) * sizeof(collector::FrameRecord);
    if (!writer_.Reserve(collector::kAlloc, bytes, &slot)) {
      writer_.CountDroppedSample();
      if (tag != 0) (*env)->SetTag(env, object, 0);  // no free or promote for it
      return;
    }
    collector::AllocRecord rec;
    rec.tag = static_cast<uint64_t>(tag);
    rec.size = static_cast<uint64_t>(size);
    rec.weight = info.weight;
    rec.klass = reinterpret_cast<uintptr_t>(klass);
    rec.thread = tl_thread_id;
    rec.frame_count = static_cast<uint32_t>(count);
    std::memcpy(slot.payload, &rec, sizeof rec);
    uint8_t* out = slot.payload + sizeof rec;
    for (vmtiInt i = 0; i < count; ++i) {
      collector::FrameRecord f{reinterpret_cast<uintptr_t>(frames[i].method), frames[i].location};
      std::memcpy(out + i * sizeof f, &f, sizeof f);
    }
    if (writer_.Commit(slot)) Wake();
    samples_.fetch_add(1, std::memory_order_relaxed);
  }

  void OnObjectFree(vmtiEnv* env, vmtiLong tag) { OnTagEvent(env, tag, false); }
  void OnObjectPromote(vmtiEnv* env, vmtiLong tag) { OnTagEvent(env, tag, true); }

  void OnVMDeath(vmtiEnv* env) {
    // The collection's ObjectFree events arrive (and are written) before
    // ForceGarbageCollection returns.
    if (config_.gc && !lost_.load(std::memory_order_acquire)) {
      log_.Check(env, (*env)->ForceGarbageCollection(env), "ForceGarbageCollection");
    }
    closed_.store(true, std::memory_order_release);
    StopEvents(env);
    if (monitor_.joinable()) {
      uint64_t one = 1;
      if (write(stop_fd_, &one, sizeof one) != sizeof one) {
        std::fprintf(stderr, "remote: cannot stop the monitor thread: %s\n", std::strerror(errno));
      }
      monitor_.join();
    }
    if (stop_fd_ >= 0) close(stop_fd_);
    if (!lost_.load(std::memory_order_acquire)) {
      // Blocking (the socket's 5 s send time-out): tells the collector that
      // the VM exited rather than died. Every record is committed by now.
      collector::SendMessage(sock_, &collector::kEndByte, 1, -1, 0);
      const collector::Meta* m = ring_->meta();
      std::fprintf(stderr,
                   "remote: sent %llu samples to the collector at %s (connection %u); %llu records "
                   "dropped (buffer full)\n",
                   static_cast<unsigned long long>(samples_.load()), config_.socket.c_str(),
                   connection_, static_cast<unsigned long long>(m->dropped_records.load()));
    }
    close(sock_);
    if (log_.count() > 0) {
      std::fprintf(stderr, "remote: %lld VMTI calls failed\n",
                   static_cast<long long>(log_.count()));
    }
    std::fflush(stderr);
  }

 private:
  void OnTagEvent(vmtiEnv* env, vmtiLong tag, bool promote) {
    if (Stopped(env)) return;
    collector::TagRecord rec{static_cast<uint64_t>(tag)};
    bool wake = false;
    writer_.Write(promote ? collector::kPromote : collector::kFree, &rec, sizeof rec, &wake);
    if (wake) Wake();
  }

  // True if the agent must not send: the VM is dying, or the collector is
  // gone (then the events are switched off, from this VM thread).
  bool Stopped(vmtiEnv* env) {
    if (closed_.load(std::memory_order_acquire)) return true;
    if (!lost_.load(std::memory_order_acquire)) return false;
    StopEvents(env);
    return true;
  }

  void StopEvents(vmtiEnv* env) {
    if (events_off_.exchange(true)) return;
    for (vmtiEvent e :
         {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, VMTI_EVENT_OBJECT_FREE, VMTI_EVENT_OBJECT_PROMOTE}) {
      log_.Check(env, (*env)->SetEventNotificationMode(env, VMTI_DISABLE, e, nullptr),
                 "SetEventNotificationMode(disable)");
    }
    // Per-thread enables are separate from the global one (JVMTI's rule);
    // a thread that has finished took its setting with it.
    for (vmtiThread t : threads_.Selected()) {
      const vmtiError err =
          (*env)->SetEventNotificationMode(env, VMTI_DISABLE, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, t);
      if (err != VMTI_ERROR_THREAD_NOT_ALIVE) log_.Check(env, err, "SetEventNotificationMode(thread)");
    }
  }

  void Lost(const std::string& how) {
    if (lost_.exchange(true, std::memory_order_acq_rel)) return;
    const bool shut = ring_->meta()->shutting_down.load(std::memory_order_relaxed) != 0;
    std::fprintf(stderr,
                 "remote: lost the collector at %s (%s); sampling stopped, the program "
                 "continues\n",
                 config_.socket.c_str(), shut ? "it stopped serving this VM" : how.c_str());
    std::fflush(stderr);
  }

  void Wake() {
    if (collector::SendMessage(sock_, &collector::kWakeByte, 1, -1, MSG_DONTWAIT) >= 0) return;
    // EAGAIN: the socket is full of wake-ups the collector has not read yet.
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    Lost(std::string("send: ") + std::strerror(errno));
  }

  void MonitorLoop() {
    pollfd fds[2] = {{sock_, POLLIN | POLLRDHUP, 0}, {stop_fd_, POLLIN, 0}};
    for (;;) {
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        Lost(std::string("poll: ") + std::strerror(errno));
        return;
      }
      if (fds[1].revents != 0) return;
      if (fds[0].revents == 0) continue;
      char byte;
      ssize_t n = recv(sock_, &byte, 1, MSG_DONTWAIT);
      if (n > 0) continue;  // the collector sends nothing after the welcome: ignore
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      Lost(n == 0 ? "connection closed" : std::string("recv: ") + std::strerror(errno));
      return;
    }
  }

  bool IsSent(const Key& k) {
    if (CacheSlot(k) == k) return true;
    std::lock_guard<std::mutex> g(sent_mu_);
    if (sent_.count(k) == 0) return false;
    CacheSlot(k) = k;
    return true;
  }

  void MarkSent(const Key& k) {
    {
      std::lock_guard<std::mutex> g(sent_mu_);
      sent_.insert(k);
    }
    CacheSlot(k) = k;
  }

  // One record of a fixed part and up to two names. True if written.
  bool WriteNamed(collector::RecordType type, const void* fixed, size_t fixed_bytes,
                  const std::string& a, const std::string& b) {
    collector::RingWriter::Slot slot;
    if (!writer_.Reserve(type, fixed_bytes + a.size() + b.size(), &slot)) return false;
    std::memcpy(slot.payload, fixed, fixed_bytes);
    std::memcpy(slot.payload + fixed_bytes, a.data(), a.size());
    std::memcpy(slot.payload + fixed_bytes + a.size(), b.data(), b.size());
    if (writer_.Commit(slot)) Wake();
    return true;
  }

  static std::string Clip(std::string s) {
    if (s.size() > collector::kMaxNameBytes) s.resize(collector::kMaxNameBytes);
    return s;
  }

  bool EnsureMethod(vmtiEnv* env, vmtiMethodID method) {
    const Key key{reinterpret_cast<uintptr_t>(method), kMethodKey};
    if (IsSent(key)) return true;
    char* name = nullptr;
    char* file = nullptr;
    log_.Check(env, (*env)->GetMethodName(env, method, &name, nullptr, nullptr), "GetMethodName");
    log_.Check(env, (*env)->GetMethodSourceFile(env, method, &file), "GetMethodSourceFile");
    const std::string n = Clip(agent::TakeString(env, name));
    // Relative to the program's directory, as heapprof writes them: the
    // collector runs elsewhere, and the two profiles must agree.
    const std::string f =
        Clip(agent::RelativeToProgram(agent::CurrentProgram(), agent::TakeString(env, file)));
    collector::MethodRecord rec{key.a, static_cast<uint32_t>(n.size()),
                                static_cast<uint32_t>(f.size())};
    if (!WriteNamed(collector::kMethod, &rec, sizeof rec, n, f)) return false;
    MarkSent(key);
    return true;
  }

  bool EnsureLine(vmtiEnv* env, vmtiMethodID method, vmtiLocation location) {
    const Key key{reinterpret_cast<uintptr_t>(method), location};
    if (IsSent(key)) return true;
    vmtiInt line = 0;
    if (!log_.Check(env, (*env)->GetLineNumber(env, method, location, &line), "GetLineNumber")) {
      line = 0;
    }
    collector::LineRecord rec{key.a, location, line, 0};
    bool wake = false;
    if (!writer_.Write(collector::kLine, &rec, sizeof rec, &wake)) return false;
    if (wake) Wake();
    MarkSent(key);
    return true;
  }

  bool EnsureClass(vmtiEnv* env, vmtiClass klass) {
    const Key key{reinterpret_cast<uintptr_t>(klass), kClassKey};
    if (IsSent(key)) return true;
    char* sig = nullptr;
    log_.Check(env, (*env)->GetClassSignature(env, klass, &sig, nullptr), "GetClassSignature");
    const std::string n = Clip(agent::TakeString(env, sig));
    collector::ClassRecord rec{key.a, static_cast<uint32_t>(n.size()), 0};
    if (!WriteNamed(collector::kClass, &rec, sizeof rec, n, std::string())) return false;
    MarkSent(key);
    return true;
  }

  bool EnsureThread(vmtiEnv* env, vmtiThread thread) {
    if (tl_thread_id == 0) tl_thread_id = next_thread_.fetch_add(1, std::memory_order_relaxed);
    if (tl_thread_sent) return true;
    vmtiThreadInfo info;
    std::memset(&info, 0, sizeof info);
    log_.Check(env, (*env)->GetThreadInfo(env, thread, &info), "GetThreadInfo");
    const std::string n = Clip(agent::TakeString(env, info.name));
    collector::ThreadRecord rec{tl_thread_id, static_cast<uint32_t>(n.size())};
    if (!WriteNamed(collector::kThread, &rec, sizeof rec, n, std::string())) return false;
    tl_thread_sent = true;
    return true;
  }

  Config config_;
  agent::ErrorLog log_;
  int sock_;
  std::unique_ptr<collector::SharedRing> ring_;
  collector::RingWriter writer_;
  uint32_t connection_;
  int stop_fd_ = -1;
  std::thread monitor_;
  std::atomic<bool> lost_{false};        // the collector is gone
  std::atomic<bool> closed_{false};      // VMDeath has begun
  std::atomic<bool> events_off_{false};  // StopEvents has run
  std::atomic<int64_t> next_tag_{1};
  agent::ThreadFilter threads_;
  std::atomic<uint32_t> next_thread_{1};
  std::atomic<uint64_t> samples_{0};
  std::mutex sent_mu_;
  std::unordered_set<Key, KeyHash> sent_;  // guarded by sent_mu_
};

}  // namespace
}  // namespace remote

// Agent_OnLoad, and Agent_OnAttach (minivm-attach PID load remote=OPTIONS,
// and minivm-collector --attach PID): connects to the collector from the
// running VM, as at start-up.
MINIVM_AGENT_ENTRY_POINTS(remote::Remote)
