/*
 * heapprof: a heap profiler for minivm, writing Go-compatible pprof heap
 * profiles (and collapsed stacks) from VMTI's sampled allocations.
 *
 *   minivm -agentlib:heapprof=file=heap.pb.gz prog.mv
 *   go tool pprof -http=: heap.pb.gz
 *
 * Options (comma separated; docs/tools.md has the full story):
 *   interval=BYTES   mean sampling interval (e.g. 4096, 512k); default the
 *                    VM's, 512 KiB
 *   file=PATH        the profile written at VM death (default heap.pb.gz, or
 *                    heap.folded with format=collapsed; empty: none)
 *   format=pprof|collapsed
 *   space=inuse|alloc  what collapsed stacks weigh (default inuse)
 *   dump_every=BYTES also write PATH with a sequence number (heap.0001.pb.gz,
 *                    ...) every BYTES allocated, estimated from the samples
 *   control=PATH     write a numbered dump whenever PATH exists (then
 *                    delete it); SIGUSR2 does the same
 *   http=PORT        serve /debug/pprof/heap and /debug/pprof/allocs on
 *                    127.0.0.1:PORT (0: a free port, printed on stderr)
 *   depth=N          frames per stack (default 64)
 *   threads=A+B      sample only the threads with these names
 *   top=N            sites in the exit summary (default 5; 0: no summary)
 *
 * Design:
 *  1. Each sample is captured on the allocating thread: stack (resolved to
 *     function/file/line at once, interned: common/sites.h), class, thread
 *     name and Horvitz-Thompson weight. Its object is tagged with a fresh
 *     record id; ObjectFree with that tag removes it from the in-use sums.
 *  2. Output (files, HTTP) is built on agent-owned threads from copies of
 *     the tables; they never call VMTI functions that need a VM thread.
 *  3. SIGUSR2's handler only sets a flag. A worker thread polls the flag,
 *     the control file and the dump_every counter every 100 ms and dumps;
 *     nothing is ever written from a signal handler or a GC callback.
 *  4. Callbacks arrive on several threads: HeapData and SiteTable lock
 *     internally; no agent lock is held across a VMTI call.
 */
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <utility>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../common/options.h"
#include "../common/output.h"
#include "../common/sites.h"
#include "heap_profile.h"
#include "http_server.h"
#include "vmti/vmti.h"

namespace heapprof {
namespace {

constexpr const char* kName = "heapprof";

struct Config {
  int64_t interval = -1;  // -1: the VM's
  std::string file;
  bool file_given = false;
  bool collapsed = false;
  bool collapsed_inuse = true;
  int64_t dump_every = 0;
  std::string control;
  int64_t http_port = -1;
  int64_t depth = 64;
  std::vector<std::string> threads;
  int64_t top = 5;
};

// Set by the SIGUSR2 handler, read by the worker thread: a lock-free atomic
// is both async-signal-safe and race-free across threads.
std::atomic<bool> g_sigusr2{false};
static_assert(std::atomic<bool>::is_always_lock_free, "signal-safe flag");
void OnSigusr2(int) {
  int saved = errno;
  g_sigusr2.store(true, std::memory_order_relaxed);
  errno = saved;
}

class Profiler {
 public:
  explicit Profiler(Config c) : config_(std::move(c)), log_(kName) {
    next_dump_at_ = static_cast<double>(config_.dump_every);
  }

  Config& config() { return config_; }
  agent::ErrorLog& log() { return log_; }
  HttpServer& http() { return http_; }

  void OnVMInit(vmtiEnv* env, vmtiThread main_thread) {
    vmtiInt interval = 0;
    if (log_.Check(env, (*env)->GetHeapSamplingInterval(env, &interval),
                   "GetHeapSamplingInterval")) {
      interval_.store(interval);
    }
    if (!config_.threads.empty()) MaybeEnableFor(env, main_thread);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = OnSigusr2;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    signal_installed_ = sigaction(SIGUSR2, &sa, &old_sigusr2_) == 0;
    StartWorker();
    if (config_.http_port >= 0) {
      http_.Start(
          [this](const std::string& path, const std::string& query) { return Serve(path, query); });
    }
  }

  void OnThreadStart(vmtiEnv* env, vmtiThread thread) { MaybeEnableFor(env, thread); }

  void OnSample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                vmtiLong size) {
    if (dead_.load(std::memory_order_acquire)) return;
    vmtiSampleInfo info;
    if (!log_.Check(env, (*env)->GetSampleInfo(env, &info), "GetSampleInfo")) return;
    interval_.store(info.interval, std::memory_order_relaxed);
    SiteKey key;
    key.stack = sites_.CaptureStack(env, static_cast<int>(config_.depth), &log_);
    key.klass = sites_.ClassName(env, klass, &log_);
    key.thread = sites_.ThreadName(env, thread, &log_);
    int64_t tag = next_tag_.fetch_add(1, std::memory_order_relaxed);
    // Tag first: the object cannot die before this callback returns, so the
    // record is in place before any ObjectFree for it.
    if (!log_.Check(env, (*env)->SetTag(env, object, tag), "SetTag")) tag = 0;
    double allocated = data_.RecordAlloc(tag, key, info.weight, size);
    if (config_.dump_every > 0) {
      bool due = false;
      {
        std::lock_guard<std::mutex> g(worker_mu_);
        if (allocated >= next_dump_at_) {
          while (next_dump_at_ <= allocated) {
            next_dump_at_ += static_cast<double>(config_.dump_every);
          }
          due = true;
        }
      }
      // The state is copied here, at the crossing, so that each numbered
      // dump shows the heap at its threshold however late the worker runs;
      // encoding and writing happen on the worker.
      if (due) Enqueue("dump_every");
    }
  }

  void OnObjectFree(vmtiEnv*, vmtiLong tag) { data_.RecordFree(tag); }

  void OnVMDeath(vmtiEnv* env) {
    (void)env;
    dead_.store(true, std::memory_order_release);
    StopWorker();
    http_.Stop();
    if (signal_installed_) sigaction(SIGUSR2, &old_sigusr2_, nullptr);
    std::vector<Row> rows;
    agent::SiteTable::Snapshot sites;
    data_.Copy(&rows);
    sites_.Copy(&sites);
    if (config_.top > 0) {
      std::string s = BuildSummary(rows, sites, interval_.load(), static_cast<int>(config_.top));
      std::fputs(s.c_str(), stderr);
    }
    if (!config_.file.empty() && Write(config_.file, rows, sites)) {
      if (config_.collapsed) {
        std::fprintf(stderr, "heapprof: wrote %s (collapsed stacks: flamegraph.pl, speedscope)\n",
                     config_.file.c_str());
      } else {
        std::fprintf(stderr, "heapprof: wrote %s (open with: go tool pprof -http=: %s)\n",
                     config_.file.c_str(), config_.file.c_str());
      }
    }
    if (dropped_dumps_ > 0) {
      std::fprintf(stderr, "heapprof: %lld dumps dropped (the writer fell behind)\n",
                   static_cast<long long>(dropped_dumps_));
    }
    if (log_.count() > 0) {
      std::fprintf(stderr, "heapprof: %lld VMTI calls failed\n",
                   static_cast<long long>(log_.count()));
    }
    std::fflush(stderr);
  }

 private:
  void MaybeEnableFor(vmtiEnv* env, vmtiThread thread) {
    vmtiThreadInfo info;
    std::memset(&info, 0, sizeof info);
    if (!log_.Check(env, (*env)->GetThreadInfo(env, thread, &info), "GetThreadInfo")) return;
    std::string name = agent::TakeString(env, info.name);
    for (const std::string& want : config_.threads) {
      if (want == name) {
        log_.Check(env,
                   (*env)->SetEventNotificationMode(env, VMTI_ENABLE,
                                                    VMTI_EVENT_SAMPLED_OBJECT_ALLOC, thread),
                   "SetEventNotificationMode(thread)");
        return;
      }
    }
  }

  bool Write(const std::string& path, const std::vector<Row>& rows,
             const agent::SiteTable::Snapshot& sites) {
    std::string data = config_.collapsed
                           ? BuildCollapsed(rows, sites, config_.collapsed_inuse)
                           : BuildPprof(rows, sites, interval_.load(), ProfileKind::kHeap);
    if (data.empty() && !config_.collapsed) {
      std::fprintf(stderr, "heapprof: could not encode the profile\n");
      return false;
    }
    std::string error;
    if (!agent::WriteOutput(path, data, &error)) {
      std::fprintf(stderr, "heapprof: %s\n", error.c_str());
      return false;
    }
    return true;
  }

  struct PendingDump {
    const char* why;
    double allocated;
    std::vector<Row> rows;
    agent::SiteTable::Snapshot sites;
  };

  void Enqueue(const char* why) {
    PendingDump d;
    d.why = why;
    d.allocated = data_.allocated_bytes();
    data_.Copy(&d.rows);
    sites_.Copy(&d.sites);
    std::lock_guard<std::mutex> g(worker_mu_);
    if (queue_.size() >= kMaxQueued) {
      dropped_dumps_++;  // the worker is far behind: keep memory bounded
      return;
    }
    queue_.push_back(std::move(d));
    worker_cv_.notify_one();
  }

  void DumpNumbered(const PendingDump& d) {
    std::string base =
        config_.file.empty() ? (config_.collapsed ? "heap.folded" : "heap.pb.gz") : config_.file;
    std::string path = agent::NumberedPath(base, ++dump_seq_);
    if (Write(path, d.rows, d.sites)) {
      std::fprintf(stderr, "heapprof: wrote %s (%s, est. %s allocated)\n", path.c_str(), d.why,
                   agent::HumanBytes(d.allocated).c_str());
    }
  }

  void StartWorker() {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    worker_ = std::thread([this] { WorkerLoop(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void StopWorker() {
    {
      std::lock_guard<std::mutex> g(worker_mu_);
      worker_stop_ = true;
      worker_cv_.notify_one();
    }
    if (worker_.joinable()) worker_.join();
  }

  // Polls every 100 ms: the signal flag and the control file (on-demand
  // dumps of the current state), and the queue of dump_every snapshots. On
  // stop it drains the queue, so that no threshold crossed is lost.
  void WorkerLoop() {
    std::unique_lock<std::mutex> lk(worker_mu_);
    while (true) {
      if (queue_.empty() && !worker_stop_) {
        worker_cv_.wait_for(lk, std::chrono::milliseconds(100));
      }
      const char* why = nullptr;
      if (g_sigusr2.exchange(false, std::memory_order_relaxed)) why = "SIGUSR2";
      if (!config_.control.empty() && access(config_.control.c_str(), F_OK) == 0) {
        unlink(config_.control.c_str());
        why = "control file";
      }
      if (why != nullptr) {
        lk.unlock();
        Enqueue(why);
        lk.lock();
      }
      if (!queue_.empty()) {
        PendingDump d = std::move(queue_.front());
        queue_.pop_front();
        lk.unlock();
        DumpNumbered(d);
        lk.lock();
        continue;
      }
      if (worker_stop_) break;
    }
  }

  HttpResponse Serve(const std::string& path, const std::string& query) {
    HttpResponse r;
    bool heap = path == "/debug/pprof/heap";
    bool allocs = path == "/debug/pprof/allocs";
    if (path == "/debug/pprof/" || path == "/debug/pprof" || path == "/") {
      r.content_type = "text/plain; charset=utf-8";
      r.body =
          "minivm heapprof\n"
          "/debug/pprof/heap     in-use profile (pprof, default sample type inuse_space)\n"
          "/debug/pprof/allocs   allocation profile (pprof, default sample type alloc_space)\n"
          "?debug=1              collapsed stacks as text instead\n";
      return r;
    }
    if (!heap && !allocs) {
      r.status = 404;
      return r;
    }
    std::vector<Row> rows;
    agent::SiteTable::Snapshot sites;
    data_.Copy(&rows);
    sites_.Copy(&sites);
    bool debug = ("&" + query + "&").find("&debug=1&") != std::string::npos;
    if (debug) {
      r.content_type = "text/plain; charset=utf-8";
      r.body = BuildCollapsed(rows, sites, heap);
      return r;
    }
    r.body =
        BuildPprof(rows, sites, interval_.load(), heap ? ProfileKind::kHeap : ProfileKind::kAllocs);
    if (r.body.empty()) r.status = 500;
    r.extra_headers = std::string("Content-Disposition: attachment; filename=\"") +
                      (heap ? "heap" : "allocs") + "\"\r\n";
    return r;
  }

  Config config_;
  agent::ErrorLog log_;
  agent::SiteTable sites_;
  HeapData data_;
  HttpServer http_;
  std::atomic<int64_t> next_tag_{1};
  std::atomic<int64_t> interval_{524288};
  std::atomic<bool> dead_{false};
  bool signal_installed_ = false;
  struct sigaction old_sigusr2_;
  std::mutex worker_mu_;
  std::condition_variable worker_cv_;
  static constexpr size_t kMaxQueued = 64;
  std::deque<PendingDump> queue_;  // guarded by worker_mu_
  int64_t dropped_dumps_ = 0;      // guarded by worker_mu_
  bool worker_stop_ = false;
  double next_dump_at_ = 0;
  int dump_seq_ = 0;
  std::thread worker_;
};

Profiler* g_profiler = nullptr;

// Trampolines: no C++ exception (bad_alloc, a thread that cannot start) may
// No C++ exception may unwind into the VM (common/sites.h).
template <typename F>
void Guard(const char* what, F&& f) {
  agent::Guard(kName, what, std::forward<F>(f));
}
void JNI_VMInit(vmtiEnv* env, vmtiThread t) {
  Guard("VMInit", [&] { g_profiler->OnVMInit(env, t); });
}
void JNI_VMDeath(vmtiEnv* env) {
  Guard("VMDeath", [&] { g_profiler->OnVMDeath(env); });
}
void JNI_ThreadStart(vmtiEnv* env, vmtiThread t) {
  Guard("ThreadStart", [&] { g_profiler->OnThreadStart(env, t); });
}
void JNI_Sample(vmtiEnv* env, vmtiThread t, vmtiObject o, vmtiClass k, vmtiLong s) {
  Guard("SampledObjectAlloc", [&] { g_profiler->OnSample(env, t, o, k, s); });
}
void JNI_ObjectFree(vmtiEnv* env, vmtiLong tag) {
  Guard("ObjectFree", [&] { g_profiler->OnObjectFree(env, tag); });
}

int ParseConfig(const char* options, Config* c) {
  agent::OptionList list;
  std::string bad;
  if (!agent::SplitOptions(options, &list, &bad)) {
    return agent::BadOption(kName, bad, "", "empty or repeated option");
  }
  for (const auto& kv : list) {
    const std::string& k = kv.first;
    const std::string& v = kv.second;
    if (k == "interval") {
      if (!agent::ParseBytes(v, 0, 0x7fffffff, &c->interval)) {
        return agent::BadOption(kName, k, v, "want bytes, e.g. 4096 or 512k");
      }
    } else if (k == "file") {
      c->file = v;
      c->file_given = true;
    } else if (k == "format") {
      if (v == "pprof")
        c->collapsed = false;
      else if (v == "collapsed")
        c->collapsed = true;
      else
        return agent::BadOption(kName, k, v, "want pprof or collapsed");
    } else if (k == "space") {
      if (v == "inuse")
        c->collapsed_inuse = true;
      else if (v == "alloc")
        c->collapsed_inuse = false;
      else
        return agent::BadOption(kName, k, v, "want inuse or alloc");
    } else if (k == "dump_every") {
      if (!agent::ParseBytes(v, 1, INT64_MAX, &c->dump_every)) {
        return agent::BadOption(kName, k, v, "want bytes > 0, e.g. 64m");
      }
    } else if (k == "control") {
      if (v.empty()) return agent::BadOption(kName, k, v, "want a file path");
      c->control = v;
    } else if (k == "http") {
      if (!agent::ParseInt(v, 0, 65535, &c->http_port)) {
        return agent::BadOption(kName, k, v, "want a port number, 0 for any free port");
      }
    } else if (k == "depth") {
      if (!agent::ParseInt(v, 1, 4096, &c->depth)) {
        return agent::BadOption(kName, k, v, "want a frame count from 1 to 4096");
      }
    } else if (k == "threads") {
      if (!agent::SplitNames(v, '+', &c->threads)) {
        return agent::BadOption(kName, k, v, "want thread names joined by '+', e.g. main+thread-2");
      }
    } else if (k == "top") {
      if (!agent::ParseInt(v, 0, 1000, &c->top)) {
        return agent::BadOption(kName, k, v, "want a count from 0 to 1000");
      }
    } else {
      return agent::BadOption(kName, k, v,
                              "unknown option (known: interval, file, format, space, dump_every, "
                              "control, http, depth, threads, top)");
    }
  }
  if (!c->file_given) c->file = c->collapsed ? "heap.folded" : "heap.pb.gz";
  return 0;
}

}  // namespace
}  // namespace heapprof

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void* reserved) {
  using namespace heapprof;
  (void)reserved;
  Config config;
  if (ParseConfig(options, &config) != 0) return 1;
  vmtiEnv* env = nullptr;
  if ((*vm)->GetEnv(vm, reinterpret_cast<void**>(&env), VMTI_VERSION_1) != VMTI_ERROR_NONE) {
    std::fprintf(stderr, "heapprof: GetEnv failed\n");
    return 1;
  }
  auto profiler = std::make_unique<Profiler>(config);
  agent::ErrorLog& log = profiler->log();

  vmtiCapabilities caps;
  std::memset(&caps, 0, sizeof caps);
  caps.can_generate_sampled_alloc_events = 1;
  caps.can_tag_objects = 1;
  caps.can_generate_object_free_events = 1;
  if (!log.Check(env, (*env)->AddCapabilities(env, &caps), "AddCapabilities")) return 1;

  vmtiEventCallbacks cb;
  std::memset(&cb, 0, sizeof cb);
  cb.VMInit = &JNI_VMInit;
  cb.VMDeath = &JNI_VMDeath;
  cb.ThreadStart = &JNI_ThreadStart;
  cb.SampledObjectAlloc = &JNI_Sample;
  cb.ObjectFree = &JNI_ObjectFree;
  if (!log.Check(env, (*env)->SetEventCallbacks(env, &cb, static_cast<vmtiInt>(sizeof cb)),
                 "SetEventCallbacks")) {
    return 1;
  }
  if (config.interval >= 0 &&
      !log.Check(env, (*env)->SetHeapSamplingInterval(env, static_cast<vmtiInt>(config.interval)),
                 "SetHeapSamplingInterval")) {
    return 1;
  }
  if (config.http_port >= 0) {
    std::string error;
    if (!profiler->http().Listen(static_cast<int>(config.http_port), &error)) {
      std::fprintf(stderr, "heapprof: bad option 'http=%lld': cannot listen on %s\n",
                   static_cast<long long>(config.http_port), error.c_str());
      return 1;
    }
    std::fprintf(stderr, "heapprof: serving http://127.0.0.1:%d/debug/pprof/heap\n",
                 profiler->http().port());
  }
  struct {
    vmtiEvent event;
    bool on;
  } events[] = {
      {VMTI_EVENT_VM_INIT, true},
      {VMTI_EVENT_VM_DEATH, true},
      {VMTI_EVENT_OBJECT_FREE, true},
      // With threads=, the event is enabled per thread from VMInit/ThreadStart.
      {VMTI_EVENT_SAMPLED_OBJECT_ALLOC, config.threads.empty()},
      {VMTI_EVENT_THREAD_START, !config.threads.empty()},
  };
  for (const auto& e : events) {
    if (e.on &&
        !log.Check(env, (*env)->SetEventNotificationMode(env, VMTI_ENABLE, e.event, nullptr),
                   "SetEventNotificationMode")) {
      return 1;
    }
  }
  // Lives until the process ends: no event is sent after VMDeath, but the
  // library may stay mapped.
  g_profiler = profiler.release();
  return 0;
}
