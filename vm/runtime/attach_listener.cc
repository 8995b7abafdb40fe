#include "vm/runtime/attach_listener.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gc/heap.h"
#include "gc/heap_walker.h"
#include "gc/sampler.h"
#include "vm/bytecode/program.h"
#include "vm/runtime/attach_protocol.h"
#include "vm/runtime/thread.h"
#include "vm/runtime/vm.h"

namespace minivm {
namespace {

using attach::Clock;
using attach::IoResult;
// A whole request must arrive, and the whole reply leave, within this.
constexpr std::chrono::milliseconds kIoTimeout{2000};

std::atomic<VM*> g_vm{nullptr};
std::atomic<AttachAgentHost*> g_host{nullptr};

// Only the dispatcher thread starts the listener; a failed start (an unsafe
// folder) is retried at the next request.
bool g_listening = false;
// The socket file, once bound; read by RemoveAttachSocket at exit.
std::atomic<bool> g_socket_bound{false};
char g_socket_path[sizeof(sockaddr_un::sun_path)];

void Complain(const std::string& message) {
  std::fprintf(stderr, "minivm: attach: %s\n", message.c_str());
}

// .who: the private folder must be ours, a real folder, 0700.
bool PrivateDirectoryReady(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    Complain(absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
    return false;
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    Complain(absl::StrCat("refusing ", dir, ": not a folder owned by this user with mode 0700"));
    return false;
  }
  return true;
}

// ---- Commands --------------------------------------------------------------

// A thread dump shows far more of a deep stack than an error trace does
// (jstack shows whole stacks; HotSpot's MaxJavaStackTraceDepth is 1024):
// a recursion hundreds of calls deep is dumped frame by frame, while a
// thread at --stack-depth=1000000 still fits the reply (kMaxReplyBytes).
inline constexpr size_t kDumpInnermostFrames = 1024;
inline constexpr size_t kDumpOutermostFrames = 64;

std::string ThreadDump(VM* vm) {
  struct Dump {
    int index;
    std::string text;
  };
  std::vector<Dump> dumps;
  const Program& program = vm->program();
  const std::string path = attach::EscapeField(program.path);
  // One safepoint: every attached thread stopped where its frames are
  // precise, as GetAllStackTraces takes them. Only malloc'd memory here.
  vm->heap()->RunAtSafepoint(nullptr, [&](gc::Mutator* m) {
    const VMThread* t = VMThread::FromMutator(m);
    const ReportedTrace trace = t->StackTrace(program, kDumpInnermostFrames, kDumpOutermostFrames);
    // Names and the path are escaped: a newline in one would forge a line.
    std::string text = absl::StrCat("\"", attach::EscapeField(t->name), "\" #", t->index, "\n");
    for (size_t i = 0; i < trace.frames.size(); ++i) {
      if (trace.omitted != 0 && i == kDumpInnermostFrames) {
        absl::StrAppend(&text, "  ... ", trace.omitted, trace.omitted == 1 ? " frame" : " frames",
                        " omitted\n");
      }
      const StackTraceEntry& e = trace.frames[i];
      absl::StrAppend(&text, "  at ", attach::EscapeField(e.function), " (", path, ":", e.line,
                      ")\n");
    }
    dumps.push_back({t->index, std::move(text)});
  });
  if (dumps.empty()) return "";
  std::sort(dumps.begin(), dumps.end(),
            [](const Dump& a, const Dump& b) { return a.index < b.index; });
  std::string out;
  for (size_t i = 0; i < dumps.size(); ++i) {
    if (i != 0) out += '\n';
    out += dumps[i].text;
  }
  // Agent threads (RunAgentThread) run the agent's native code: no frames
  // in the language, but threads of the VM all the same (jstack lists its
  // native threads too). They are never stopped by a safepoint, so they are
  // read from the VM's thread list, after the language threads.
  for (const VMThread* t : vm->LiveThreads()) {
    if (t->agent_thread) {
      absl::StrAppend(&out, "\n\"", attach::EscapeField(t->name), "\" agent thread\n");
    }
  }
  return out;
}

std::string HeapSummary(VM* vm, AttachAgentHost* host) {
  gc::Heap* heap = vm->heap();
  const std::vector<gc::SpaceUsage> spaces = heap->SpaceUsages(nullptr);
  const gc::HeapStats stats = heap->Stats();
  std::string out = absl::StrCat("heap: ", stats.heap_capacity_bytes, " bytes reserved\n");
  for (const gc::SpaceUsage& s : spaces) {
    absl::StrAppend(&out, "  ", s.name, ": ", s.used_bytes, " of ", s.capacity_bytes,
                    " bytes used\n");
  }
  absl::StrAppend(&out, "collections: ", stats.minor_collections, " minor, ",
                  stats.full_collections, " full (", heap->CollectionCount(), " in all); pauses ",
                  stats.total_pause_ns / 1000, " us in all, longest ", stats.max_pause_ns / 1000,
                  " us\n");
  // bytes_allocated counts TLABs, objects placed outside them and large
  // objects alike (gc::HeapStats).
  absl::StrAppend(&out, "allocated: ", stats.bytes_allocated, " bytes, including ",
                  stats.large_objects_allocated,
                  stats.large_objects_allocated == 1 ? " large object\n" : " large objects\n");
  if (host != nullptr) {
    out += host->DescribeSampling();
  } else {
    absl::StrAppend(&out, "sampling: off (no agent can be loaded into this VM); interval ",
                    gc::kDefaultSamplingInterval, " bytes, the default\n");
  }
  return out;
}

// Counts every object reachable from the roots by class, from one heap walk
// (gc/heap_walker.h: each object's first visit is reported once). Called
// inside the walk's pause: it only reads headers, and allocates with malloc
// only, never on the heap.
class HistogramWalk final : public gc::HeapWalkVisitor {
 public:
  struct Count {
    uint64_t instances = 0;
    uint64_t bytes = 0;
  };
  Action OnRoot(const gc::RootInfo&, gc::Object*) override { return Action::kFollow; }
  Action OnReference(gc::Object*, uint32_t, gc::Object*) override { return Action::kFollow; }
  Action OnFirstVisit(gc::Object* obj) override {
    Count& c = counts_[obj->klass];
    c.instances++;
    c.bytes += obj->Size();
    return Action::kFollow;
  }
  const absl::flat_hash_map<const gc::ClassLayout*, Count>& counts() const { return counts_; }

 private:
  absl::flat_hash_map<const gc::ClassLayout*, Count> counts_;
};

std::string WithCommas(uint64_t v) {
  std::string digits = absl::StrCat(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// `heap histo[=N|all]`: the class histogram of the live heap as
// jmap -histo:live prints it, in heapprof's histo= format (docs/tools.md):
// the `rows` largest classes by bytes (0: all), then the total of all.
// Appends to *out; false with the reason in *error when no walk ran.
bool ClassHistogram(VM* vm, uint64_t rows, std::string* out, std::string* error) {
  HistogramWalk walk;
  const auto begin = Clock::now();
  const std::optional<gc::HeapWalkStats> stats = vm->heap()->WalkHeap(nullptr, nullptr, walk);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
  if (!stats.has_value()) {
    *error = "the VM is ending";
    return false;
  }
  if (stats->aborted) {  // only when the walk had no memory for its bitmap
    *error = "cannot take a class histogram: no memory for the heap walk";
    return false;
  }
  struct Row {
    std::string name;
    HistogramWalk::Count count;
  };
  std::vector<Row> table;
  HistogramWalk::Count total;
  // Klasses are the VM's, never on the heap: their names are read after the
  // pause.
  for (const auto& [layout, count] : walk.counts()) {
    const Klass* k = vm->FindClass(layout);
    table.push_back({k != nullptr ? k->name : "?", count});
    total.instances += count.instances;
    total.bytes += count.bytes;
  }
  std::sort(table.begin(), table.end(), [](const Row& a, const Row& b) {
    return a.count.bytes != b.count.bytes ? a.count.bytes > b.count.bytes : a.name < b.name;
  });
  absl::StrAppendFormat(out,
                        "class histogram (live objects, exact: every object reachable from the "
                        "roots; a heap walk of %.1f ms):\n",
                        ms);
  absl::StrAppendFormat(out, "%5s %14s %16s  %s\n", "#", "instances", "bytes", "class");
  for (size_t i = 0; i < table.size() && (rows == 0 || i < rows); ++i) {
    absl::StrAppendFormat(out, "%4d: %14s %16s  %s\n", i + 1, WithCommas(table[i].count.instances),
                          WithCommas(table[i].count.bytes), table[i].name);
  }
  absl::StrAppendFormat(out, "%5s %14s %16s  (%d %s)\n", "Total", WithCommas(total.instances),
                        WithCommas(total.bytes), table.size(),
                        table.size() == 1 ? "class" : "classes");
  return true;
}

// Runs one validated request; false with the error text in *reply.
// `loading` is called once a `load` starts loading its agent.
bool Execute(const std::string& command, const std::string& argument,
             const std::function<void()>& loading, std::string* reply) {
  VM* vm = g_vm.load(std::memory_order_acquire);
  AttachAgentHost* host = g_host.load(std::memory_order_acquire);
  if (vm == nullptr || !vm->started()) {
    *reply = "the VM has not started its program yet; try again";
    return false;
  }
  if (command == "threads") {
    *reply = ThreadDump(vm);
    if (reply->empty()) {
      *reply = "the VM is ending";
      return false;
    }
    return true;
  }
  if (command == "heap") {
    // The argument was checked with the request (ParseRequestPayload).
    uint64_t rows = 0;
    std::string error;
    if (!argument.empty() && !attach::ParseHistogramArgument(argument, &rows, &error)) {
      *reply = error;
      return false;
    }
    // The summary's lines stay as the contract lists them; the histogram
    // follows them.
    std::string out = HeapSummary(vm, host);
    if (!argument.empty() && !ClassHistogram(vm, rows, &out, &error)) {
      *reply = error;
      return false;
    }
    *reply = std::move(out);
    return true;
  }
  if (command == "gc") {
    uint64_t before = 0;
    for (const gc::SpaceUsage& s : vm->heap()->SpaceUsages(nullptr)) before += s.used_bytes;
    if (!vm->heap()->CollectGarbage(nullptr, gc::GcCause::kExplicit)) {
      *reply = "the VM is ending";
      return false;
    }
    *reply = absl::StrCat("full collection done: ", before, " -> ",
                          vm->heap()->Stats().heap_used_bytes, " bytes used\n");
    return true;
  }
  if (host == nullptr) {
    *reply = "this VM cannot load agents";
    return false;
  }
  if (command == "agents") {
    *reply = host->DescribeAgents();
    return true;
  }
  // load
  loading();
  return host->LoadAgent(argument, reply);
}

// Reads, checks and answers one connection (attach_listener.h .who and .input).
void Serve(int fd, uid_t self, uid_t test_uid) {
  const Clock::time_point deadline = Clock::now() + kIoTimeout;
  // A reply gets its own time: the request's may be used up (a silent
  // client), and the reply is what tells the client why.
  auto answer = [&](uint32_t status, const std::string& text) {
    std::string t = text;
    if (t.size() > attach::kMaxReplyBytes) t.resize(attach::kMaxReplyBytes);
    // A client gone or stuck gets no reply; nothing else to do about it.
    attach::SendAll(fd, attach::EncodeReply(status, t), Clock::now() + kIoTimeout);
  };
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) {
    answer(attach::kStatusError, "cannot read the peer's credentials");
    return;
  }
  const bool allowed = attach::PeerAllowed(cred.uid, self) &&
                       (test_uid == static_cast<uid_t>(-1) || cred.uid == test_uid);
  if (!allowed) {
    answer(attach::kStatusError, absl::StrCat("permission denied: user ", cred.uid,
                                              " may not attach to a VM of user ", self));
    return;
  }
  char head[8];
  if (attach::ReadExactly(fd, head, sizeof head, deadline) != IoResult::kDone) {
    answer(attach::kStatusError, "malformed request: incomplete header (or timed out)");
    return;
  }
  if (std::memcmp(head, attach::kMagic, sizeof attach::kMagic) != 0) {
    answer(attach::kStatusError, "malformed request: not the minivm attach protocol");
    return;
  }
  const uint32_t size = attach::GetU32(reinterpret_cast<const unsigned char*>(head + 4));
  if (size > attach::kMaxRequestBytes) {
    answer(attach::kStatusError, absl::StrCat("malformed request: ", size, " bytes (at most ",
                                              attach::kMaxRequestBytes, ")"));
    return;
  }
  std::string payload(size, '\0');
  if (attach::ReadExactly(fd, payload.data(), size, deadline) != IoResult::kDone) {
    answer(attach::kStatusError, "malformed request: incomplete body (or timed out)");
    return;
  }
  std::string command, argument, error;
  bool has_argument = false;
  if (!attach::ParseRequestPayload(payload, &command, &argument, &has_argument, &error)) {
    answer(attach::kStatusError, error);
    return;
  }
  std::string reply;
  // Agent_OnAttach may take longer than the client waits: telling it that
  // the agent is loading lets it say so, rather than that the VM never
  // answered.
  const bool ok = Execute(
      command, argument,
      [&] {
        attach::SendAll(fd, attach::EncodeReply(attach::kStatusLoading, ""),
                        Clock::now() + kIoTimeout);
      },
      &reply);
  answer(ok ? attach::kStatusOk : attach::kStatusError, reply);
}

void ListenerLoop(int listen_fd) {
  const uid_t self = geteuid();
  // Test seam (tests/tools): pretend only this uid may attach. It can only
  // refuse more peers, never admit one the rule above refuses.
  uid_t test_uid = static_cast<uid_t>(-1);
  if (const char* s = std::getenv("MINIVM_ATTACH_TEST_ONLY_UID"); s != nullptr) {
    uint32_t v = 0;
    if (absl::SimpleAtoi(s, &v)) test_uid = static_cast<uid_t>(v);
  }
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: back off instead of spinning.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      Complain(absl::StrCat("accept failed, no longer listening: ", std::strerror(errno)));
      return;
    }
    Serve(fd, self, test_uid);
    // Closing with unread input would reset the connection, and the peer
    // could lose the reply: discard what has arrived (bounded) first.
    char sink[4096];
    for (size_t discarded = 0; discarded < (1u << 20);) {
      const ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
      if (n <= 0) break;
      discarded += static_cast<size_t>(n);
    }
    shutdown(fd, SHUT_RDWR);
    close(fd);
  }
}

// A signal that would end the process with its default action: the socket
// file goes first (unlink is async-signal-safe), then the signal takes its
// default action again (SA_RESETHAND) and ends the process as before.
void RemoveSocketAndDie(int sig) {
  unlink(g_socket_path);
  raise(sig);
}

// Exits the process survives long enough to clean up after itself: exit()
// (an agent's, from any thread) through atexit, and the signals that end a
// process by default and that nothing else in the process has taken
// (SIGHUP of a closed terminal, resource limits; SIGPIPE only where the
// signal dispatcher did not take it, vm/runtime/signal_dispatcher.h). A
// handler someone else installed is left alone, and a later one replaces
// this one. Faults (SIGSEGV and the like) are left alone too: the
// sanitizers and agents may handle them. SIGKILL leaves the file;
// the next client or VM removes it (RemoveStaleFiles).
void RemoveSocketAtExit() {
  std::atexit(RemoveAttachSocket);
  for (int sig : {SIGHUP, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ}) {
    struct sigaction current;
    if (sigaction(sig, nullptr, &current) != 0 || (current.sa_flags & SA_SIGINFO) != 0 ||
        current.sa_handler != SIG_DFL) {
      continue;
    }
    struct sigaction remove {};
    remove.sa_handler = RemoveSocketAndDie;
    sigemptyset(&remove.sa_mask);
    remove.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigaction(sig, &remove, nullptr);
  }
}

// Removes the socket and trigger files in the folder whose process has
// ended, or whose pid now names a program that is not a minivm VM (no
// marker thread): the files of VMs killed outright (SIGKILL), which nothing
// else removes. A live VM always has its marker before it has a socket.
void RemoveStaleFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  const pid_t self = getpid();
  while (const dirent* e = readdir(d)) {
    const std::string_view name = e->d_name;
    const size_t dot = name.find('.');
    if (dot == std::string_view::npos) continue;
    const std::string_view suffix = name.substr(dot);
    int32_t pid = 0;
    if ((suffix != ".sock" && suffix != ".trigger") ||
        !absl::SimpleAtoi(std::string(name.substr(0, dot)), &pid) || pid <= 0 || pid == self) {
      continue;
    }
    std::string why;
    bool marked = false;
    attach::IsAttachableVm(pid, &why, &marked);
    if (attach::ProcessEnded(pid) || !marked) {
      unlinkat(dirfd(d), e->d_name, 0);
    }
  }
  closedir(d);
}

bool StartListener() {
  const uid_t uid = geteuid();
  const std::string dir = attach::AttachDirectory(uid);
  if (!PrivateDirectoryReady(dir)) return false;
  const std::string path = attach::SocketPath(uid, getpid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    Complain(absl::StrCat("socket path too long: ", path));
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    Complain(absl::StrCat("cannot create a socket: ", std::strerror(errno)));
    return false;
  }
  unlink(path.c_str());  // a stale file of an earlier process with our pid
  RemoveStaleFiles(dir);
  // The folder is 0700, so no one else can reach the socket in the moment
  // between bind and chmod.
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path.c_str(), 0600) != 0 || listen(fd, 16) != 0) {
    Complain(absl::StrCat("cannot listen on ", path, ": ", std::strerror(errno)));
    close(fd);
    unlink(path.c_str());
    return false;
  }
  std::memcpy(g_socket_path, path.c_str(), path.size() + 1);
  g_socket_bound.store(true, std::memory_order_release);
  try {
    // Made from the dispatcher thread, so it inherits its all-blocked mask.
    std::thread(ListenerLoop, fd).detach();
  } catch (const std::system_error&) {
    Complain("cannot start the listener thread");
    g_socket_bound.store(false);
    close(fd);
    unlink(path.c_str());
    return false;
  }
  RemoveSocketAtExit();
  return true;
}

}  // namespace

void ConfigureAttach(VM* vm, AttachAgentHost* host) {
  g_host.store(host, std::memory_order_release);
  g_vm.store(vm, std::memory_order_release);
}

bool HandleAttachSignal() {
  const std::string trigger = attach::TriggerPath(geteuid(), getpid());
  struct stat st;
  // Only a regular file of this user or root in the private folder counts.
  if (lstat(trigger.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      (st.st_uid != geteuid() && st.st_uid != 0)) {
    return false;
  }
  unlink(trigger.c_str());
  if (!g_listening) g_listening = StartListener();
  return true;
}

void PrepareAttachForExit() {
  if (AttachAgentHost* host = g_host.load(std::memory_order_acquire)) host->BeforeExit();
}

void RemoveAttachSocket() {
  if (g_socket_bound.load(std::memory_order_acquire)) unlink(g_socket_path);
}

}  // namespace minivm
