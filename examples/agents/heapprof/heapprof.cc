/*
 * heapprof: a heap profiler for minivm, writing Go-compatible pprof heap
 * profiles (and collapsed stacks) from VMTI's sampled allocations.
 *
 *   minivm -agentlib:heapprof=file=heap.pb.gz prog.mv
 *   go tool pprof -http=: heap.pb.gz
 *
 * Options (comma separated; docs/tools.md has the full story):
 *   interval=BYTES   mean sampling interval (e.g. 4096, 512k); default: the
 *                    VM's
 *   file=PATH        the profile written at VM death (default heap.pb.gz, or
 *                    heap.folded with format=collapsed; empty: none)
 *   format=pprof|collapsed
 *   space=inuse|alloc  what collapsed stacks weigh (default inuse)
 *   dump_every=BYTES also write PATH with a sequence number (heap.0001.pb.gz,
 *                    ...) every BYTES allocated, estimated from the samples
 *   control=PATH     write a numbered dump whenever PATH exists (then
 *                    delete it); SIGUSR2 does the same
 *   http=[ADDR:]PORT serve Go's net/http/pprof heap endpoints (/debug/pprof/)
 *                    on ADDR:PORT, default address 127.0.0.1 (port 0: a
 *                    free one, printed on stderr); pprof_http.h
 *   depth=N          frames per stack (default 64)
 *   threads=A+B      sample only the threads with these names; A+ (or A++B)
 *                    also samples every thread A spawns, directly or not
 *   top=N            sites in the exit summary (default 5; 0: no summary)
 *   gc=1|0           collect the whole heap before every profile that
 *                    reports live data (default 1, as jmap -histo:live);
 *                    0: live is as of the last collection, and says so
 *   histo=N|all      add to the exit summary a class histogram of the live
 *                    heap (jmap -histo:live), exact, from a heap walk: its N
 *                    largest classes (default 0: none); common/class_histogram.h
 *   retained=N       label the live samples of the N sites with the most live
 *                    bytes, in the final profile, with where they are held
 *                    from: pprof labels root ("global cache") and
 *                    retained_by (the root and the first references of the
 *                    shortest path from it); `go tool pprof
 *                    -tagfocus=root=...` then selects what a root retains
 *                    (default 0: none; common/retention.h)
 *   path_objects=N   the path search's budget in objects (default 2000000)
 *   path_seconds=S   and in seconds of walking (default 2), as leakcheck's
 *   gdump=FRACTION   also write a numbered dump each time the estimated live
 *                    heap after a collection exceeds its previous maximum by
 *                    FRACTION (e.g. 0.1; jemalloc's prof_gdump)
 *
 * Design:
 * .capture  Each sample is captured on the allocating thread: stack (resolved to
 *     function/file/line at once, interned: common/sites.h), class, thread
 *     name and Horvitz-Thompson weight. Its object is tagged with a fresh
 *     record id; ObjectFree with that tag removes it from the in-use sums.
 * .output  Output (files, HTTP) is built on agent-owned threads from copies of
 *     the tables; they never call VMTI functions that need a VM thread
 *     (ForceGarbageCollection, which the worker and ?gc=1 call, may be
 *     called from any thread: the collection's ObjectFree events reach the
 *     tables before it returns).
 *     The HTTP endpoints keep Go's rule whatever gc= says: in-use values
 *     as of the last collection, unless the URL asks for one (?gc=1).
 * .sigusr2  SIGUSR2's handler only counts the signal. A worker thread polls that
 *     count and the control file every 100 ms, and writes the dumps queued
 *     to it (dump_every's and gdump's, whose state was taken when they came
 *     due); nothing is ever written from a signal handler or a GC callback.
 *     The handler, once installed, stays until the process ends, so that
 *     SIGUSR2 never takes its default action (the end of the VM): a request
 *     after the worker stopped (VM death, `stop`) is only counted.
 * .threads  Callbacks arrive on several threads: HeapData and SiteTable lock
 *     internally; no agent lock is held across a VMTI call.
 * .live  Live means live (gc=1, the default): the final profile, the summary
 *     and every numbered dump but gdump's (which shows the collection that
 *     set the new mark) are taken right after a full collection that
 *     heapprof forces (ForceGarbageCollection, whose ObjectFree events are
 *     delivered before it returns), so in-use figures count only reachable
 *     objects. Without it they are "as of the last collection", and a
 *     program that never collected would report every sampled byte live.
 *     dump_every's collection runs on the allocating thread at the
 *     crossing; SIGUSR2's and the control file's on the worker thread. No
 *     agent lock is held meanwhile, since a thread in a callback waiting
 *     for that lock could not reach the safepoint.
 * .instance  One instance per environment (common/agent.h): the library may be
 *     loaded twice (`--heap-profile=a -agentlib:heapprof=...`), and each
 *     load is an independent profiler. Only SIGUSR2, which is process-wide,
 *     has process-wide state: a counter that every instance's worker reads.
 * .attach  Attach (`minivm-attach PID load heapprof=ACTION,...`, docs/tools.md):
 *     Agent_OnAttach's first option may be an action, as async-profiler's
 *     are: start (the default) makes an attached instance (agent::Attach),
 *     which samples from then on (its profiles say that objects allocated
 *     before the attach are not in them); dump[,file=PATH] writes a profile
 *     now; set,interval=BYTES changes the interval; stop writes the final
 *     profile, stops the worker and HTTP threads and disposes of the
 *     environment (its events, tags and capabilities). dump, set and stop
 *     reach any running instance, however it started (-agentlib,
 *     --heap-profile or attach), by name (.names). A start while one runs
 *     must name the new one: a plain `load heapprof` then is refused, as
 *     the likely mistake of a user who meant `dump`. The instance object
 *     stays allocated after stop, as every instance does (common/agent.h).
 * .names  Every instance has a name: name=NAME, or "heapprof" for the first
 *     one made in the process, "heapprof-2" for the second, and so on
 *     (predictable from the order of the command line and the attaches).
 *     Instances registers the running ones; a name in use is refused at
 *     load, and stop frees it. Without name=, an action goes to the only
 *     running instance, and with several it is refused with their names.
 *     Rejected: addressing instances by environment number (what `agents`
 *     prints, but not what a user chose or can predict) and one action
 *     reaching every instance (a dump of each is rarely what is meant).
 */
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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

#include "../common/agent.h"
#include "../common/class_histogram.h"
#include "../common/errors.h"
#include "../common/options.h"
#include "../common/output.h"
#include "../common/program.h"
#include "../common/retention.h"
#include "../common/sites.h"
#include "../common/thread_filter.h"
#include "heap_profile.h"
#include "heapprof_options.h"
#include "http_server.h"
#include "pprof_http.h"
#include "sigusr2.h"
#include "vmti/vmti.h"

namespace heapprof {
namespace {

constexpr const char* kName = "heapprof";

// Live samples per site whose paths to GC roots are searched (retained=).
constexpr size_t kRetainedSamplesPerSite = 256;
// References kept in the retained_by label after the root.
constexpr size_t kRetainedLinks = 3;

// The profiler forcing a collection on this thread, if any. A forced
// collection runs on the thread that forced it, so its
// GarbageCollectionFinish arrives on this thread too; there the profiler
// named here records the collection's number in tl_forced_gc (0: none
// reported).
thread_local const void* tl_forcing = nullptr;
thread_local uint64_t tl_forced_gc = 0;
// An HTTP request's ?gc=1 collection, for its snapshot (StartHttp).
thread_local uint64_t tl_http_as_of = 0;

// "ADDR:PORT", an IPv6 address in brackets.
std::string HostPort(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class Profiler;

// The running instances of this library, by name (.names). Locked after
// g_attach_mu when both are held.
class Instances {
 public:
  static Instances& Get() {
    static Instances* const instances = new Instances;  // outlives every instance
    return *instances;
  }

  // Claims `*name` (an empty one gets the default: "heapprof" for the first
  // instance made, then "heapprof-2", ...); false if a running instance has
  // it.
  bool Claim(std::string* name) {
    std::lock_guard<std::mutex> g(mu_);
    ++made_;
    if (name->empty()) {
      for (int n = made_;; ++n) {
        *name = n == 1 ? std::string(kName) : std::string(kName) + "-" + std::to_string(n);
        if (FindLocked(*name) == running_.end()) break;
      }
    } else if (FindLocked(*name) != running_.end()) {
      return false;
    }
    running_.emplace_back(*name, nullptr);
    return true;
  }
  void Set(const std::string& name, Profiler* p) {
    std::lock_guard<std::mutex> g(mu_);
    if (auto it = FindLocked(name); it != running_.end()) it->second = p;
  }
  void Release(const std::string& name) {
    std::lock_guard<std::mutex> g(mu_);
    if (auto it = FindLocked(name); it != running_.end()) running_.erase(it);
  }
  // The instance `name` names (empty: the only one running), or null with
  // the reason in *why.
  Profiler* Find(const std::string& name, std::string* why) {
    std::lock_guard<std::mutex> g(mu_);
    const std::string names = NamesLocked();
    if (!name.empty()) {
      auto it = FindLocked(name);
      if (it != running_.end() && it->second != nullptr) return it->second;
      *why = "no heapprof named '" + name + "' is running" +
             (names.empty() ? "" : " (running: " + names + ")");
      return nullptr;
    }
    if (running_.size() == 1 && running_[0].second != nullptr) return running_[0].second;
    *why = running_.empty() ? "no heapprof is running (start one first)"
                            : "several heapprofs are running (" + names + "): say which with name=";
    return nullptr;
  }
  // The names of the running instances, comma-separated.
  std::string Names() {
    std::lock_guard<std::mutex> g(mu_);
    return NamesLocked();
  }

 private:
  std::string NamesLocked() const {
    std::string names;
    for (const auto& [n, p] : running_) names += (names.empty() ? "" : ", ") + n;
    return names;
  }
  std::vector<std::pair<std::string, Profiler*>>::iterator FindLocked(const std::string& name) {
    return std::find_if(running_.begin(), running_.end(),
                        [&](const auto& e) { return e.first == name; });
  }

  std::mutex mu_;
  int made_ = 0;
  std::vector<std::pair<std::string, Profiler*>> running_;
};

class Profiler {
 public:
  static constexpr const char* kName = heapprof::kName;
  using Config = heapprof::Config;

  // The instance's side of agent::Start (common/agent.h).
  static void DeclareOptions(Config* c, agent::OptionParser* p) {
    heapprof::DeclareOptions(c, p);
  }

  // Every path is checked now, so that a typo fails before the program
  // runs, not after it; and the HTTP server, if any, listens now, so that a
  // port that is taken fails the same way. Null after one line on stderr.
  static std::unique_ptr<Profiler> Create(Config c, vmtiVM* vm, vmtiEnv* env) {
    // Numbered dumps go beside `file`, or beside the default name.
    const std::string default_file = c.collapsed ? "heap.folded" : "heap.pb.gz";
    if (c.file_given && c.file.empty() &&
        (c.dump_every > 0 || c.gdump > 0 || !c.control.empty())) {
      std::string error;
      if (!agent::CheckOutputPath(default_file, &error)) {
        agent::BadOption(kName, "file", "",
                         "numbered dumps cannot go to the working directory: " + error);
        return nullptr;
      }
    }
    if (!c.file_given) c.file = default_file;
    std::string error;
    if (!c.file.empty() && !agent::CheckOutputPath(c.file, &error)) {
      agent::BadOption(kName, "file", c.file, "cannot write " + c.file + ": " + error);
      return nullptr;
    }
    if (!c.control.empty() && !agent::CheckOutputPath(c.control, &error)) {
      agent::BadOption(kName, "control", c.control,
                       "cannot be watched (it is deleted when seen): " + error);
      return nullptr;
    }
    // From load on, before anything says heapprof is there (the serving
    // line): a SIGUSR2 before VMInit is counted, and ignored by the worker.
    InstallSigusr2();
    std::unique_ptr<HttpServer> http;
    if (c.http_port >= 0 && (http = Listen(c)) == nullptr) return nullptr;
    // retained=: the path search's scratch tags need an environment of
    // their own (common/retention.h).
    vmtiEnv* walk_env = nullptr;
    if (c.retained > 0 && (walk_env = agent::NewWalkEnvironment(vm, kName)) == nullptr) {
      return nullptr;
    }
    // Last, so that no later failure leaves the name claimed.
    std::string name = c.name;
    if (!Instances::Get().Claim(&name)) {
      agent::BadOption(kName, "name", c.name, "a heapprof of that name is running");
      if (walk_env != nullptr) (*walk_env)->DisposeEnvironment(walk_env);
      return nullptr;
    }
    c.name = name;
    auto profiler = std::make_unique<Profiler>(std::move(c), env, walk_env);
    profiler->http_ = std::move(http);
    Instances::Get().Set(name, profiler.get());
    return profiler;
  }

  Profiler(Config c, vmtiEnv* env, vmtiEnv* walk_env)
      : config_(std::move(c)), log_(kName), env_(env), walk_env_(walk_env) {
    next_dump_at_ = static_cast<double>(config_.dump_every);
    if (!config_.threads.empty()) threads_.Parse(config_.threads);  // validated already
    // The interval is this environment's own (docs/agent-api.md, "An
    // interval per environment"), and the VM is its one source of truth:
    // asked here, again at VMInit (Install has set ours by then), and read
    // from every sample's info, which right after a change may still carry
    // the interval the sample was drawn at.
    vmtiInt interval = 0;
    if (config_.interval >= 0) {
      interval_.store(config_.interval);
    } else if (log_.Check(env, (*env)->GetHeapSamplingInterval(env, &interval),
                          "GetHeapSamplingInterval")) {
      interval_.store(interval);
    }
  }

  // Handlers: OnStart, OnThreadStart, OnSample, OnObjectFree, OnGcFinish,
  // OnVMDeath (common/agent.h).
  void Configure(agent::Setup* setup) const {
    setup->interval = config_.interval;
    threads_.Configure(setup);
  }

  agent::ErrorLog& log() { return log_; }

  // At VMInit (common/agent.h): the main thread exists, and agent threads
  // may start.
  void OnStart(vmtiEnv* env, vmtiThread main_thread) {
    vmtiInt interval = 0;
    if (log_.Check(env, (*env)->GetHeapSamplingInterval(env, &interval),
                   "GetHeapSamplingInterval")) {
      interval_.store(interval);
    }
    // main_thread is null when attached: agent::Attach passed every running
    // thread to OnThreadStart already.
    if (!config_.threads.empty() && main_thread != nullptr) {
      threads_.EnableSamplingIfSelected(env, main_thread, &log_);
    }
    sigusr2_seen_ = Sigusr2Count();
    StartWorker();
    if (http_ != nullptr) StartHttp();
  }

  void OnThreadStart(vmtiEnv* env, vmtiThread thread) {
    threads_.EnableSamplingIfSelected(env, thread, &log_);
  }

  // Inside the collection's pause: raw bookkeeping only.
  void OnGcFinish(vmtiEnv*) {
    const uint64_t n = gc_count_.fetch_add(1, std::memory_order_acq_rel) + 1;
    // The collection this instance forced runs on this thread: remember its
    // number, since the profile's in-use data is taken as of it.
    if (tl_forcing == this) tl_forced_gc = n;
    last_gc_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                      std::memory_order_relaxed);
  }

  void OnSample(vmtiEnv* env, vmtiThread thread, vmtiObject object, vmtiClass klass,
                vmtiLong size) {
    if (dead_.load(std::memory_order_acquire)) return;
    TakeOwedDumps(/*any_thread=*/false);
    agent::Sample sample;
    if (!sites_.Capture(env, object, klass, config_.depth, &next_tag_, &log_, &sample)) return;
    const vmtiSampleInfo& info = sample.info;
    interval_.store(info.interval, std::memory_order_relaxed);
    SiteKey key;
    key.stack = sample.stack;
    key.klass = sample.klass;
    key.thread = sites_.ThreadName(env, thread, &log_);
    const int64_t tag = sample.tag;  // 0: untagged, counted as allocated only
    // Recorded with the number of collections finished so far: none of
    // them has judged this object, so in-use data as of any of them leaves
    // it out (HeapData::CopyLiveAsOf).
    double allocated =
        data_.RecordAlloc(tag, key, info.weight, size, gc_count_.load(std::memory_order_acquire));
    if (config_.gdump > 0) CheckHighWater();
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
      // The state is taken as of the crossing (after a collection forced
      // on this thread with gc=1), so that each numbered dump shows the heap
      // at its threshold however late the worker runs. The collection's
      // ObjectFree events are delivered once this callback returns
      // (docs/agent-api.md, "Delivery rules"): the copy, exact as of the
      // collection, is taken at this thread's next sample (TakeOwedDumps).
      // Encoding and writing happen on the worker.
      if (due) {
        LiveNote note = CollectForLiveData(env, "at this dump's threshold");
        if (note.as_of > 0) {
          std::lock_guard<std::mutex> g(worker_mu_);
          owed_dumps_.push_back(OwedDump{std::this_thread::get_id(), std::move(note)});
        } else {
          Enqueue("dump_every", &note);
        }
      }
    }
  }

  void OnObjectFree(vmtiEnv*, vmtiLong tag) { data_.RecordFree(tag); }

  void OnVMDeath(vmtiEnv* env) { Finish(env); }

  // Made by Agent_OnAttach (agent::Attach calls this before Install), so
  // that every profile says so.
  void MarkAttached() { attached_ = true; }

  // `dump[,file=PATH]` (.attach): a profile of now (after a
  // collection with gc=1), to PATH or to the next numbered file.
  void DumpNow(const std::string& path) {
    PendingDump d;
    d.why = "minivm-attach dump";
    Copy(&d, CollectForLiveData(env_, "for this dump"));
    if (path.empty()) {
      DumpNumbered(d);
    } else if (Write(path, d.rows, d.sites, d.note, "dump (minivm-attach)")) {
      std::fprintf(stderr, "heapprof: wrote %s (est. %s allocated since %s)\n", path.c_str(),
                   agent::HumanBytes(d.allocated).c_str(),
                   attached_ ? "the attach" : "the program started");
    }
  }

  // `set,interval=BYTES`.
  bool SetInterval(int64_t bytes) {
    if (!log_.Check(env_, (*env_)->SetHeapSamplingInterval(env_, static_cast<vmtiInt>(bytes)),
                    "SetHeapSamplingInterval")) {
      return false;
    }
    interval_.store(bytes);
    std::fprintf(stderr, "heapprof: sampling interval now %lld bytes\n",
                 static_cast<long long>(bytes));
    return true;
  }

  // `stop`: the final profile, then the environment goes and the name is
  // free again (.attach).
  void Stop() {
    Finish(env_);
    log_.Check(env_, (*env_)->DisposeEnvironment(env_), "DisposeEnvironment");
    Instances::Get().Release(config_.name);
    std::fprintf(stderr, "heapprof: '%s' stopped; sampling, tags and threads released\n",
                 config_.name.c_str());
  }

  const std::string& name() const { return config_.name; }

 private:
  // At VM death, or at an attached instance's stop: no more samples, the
  // threads stopped, the summary and the final profile written.
  void Finish(vmtiEnv* env) {
    dead_.store(true, std::memory_order_release);
    TakeOwedDumps(/*any_thread=*/true);  // every event is in before VMDeath
    StopWorker();
    if (http_ != nullptr) http_->Stop();
    const LiveNote note = CollectForLiveData(env, "at exit");
    std::vector<Row> rows;
    agent::SiteTable::Snapshot sites;
    CopyRows(note, &rows);
    sites_.Copy(&sites);
    if (config_.top > 0) {
      std::string s = BuildSummary(rows, RelativeToProgram(sites), interval_.load(),
                                   static_cast<int>(config_.top), note.summary);
      std::fputs(s.c_str(), stderr);
    }
    if (config_.histo != 0) {
      const agent::ClassHistogram h = agent::TakeClassHistogram(env);
      std::fputs(agent::FormatClassHistogram(h, "heapprof: ", static_cast<int>(config_.histo)).c_str(),
                 stderr);
    }
    if (config_.retained > 0 && !config_.file.empty()) LabelRetention(env, note, &rows);
    if (!config_.file.empty() && Write(config_.file, rows, sites, note, "final profile")) {
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

  // The HTTP server of http=, listening; null after one line on stderr.
  static std::unique_ptr<HttpServer> Listen(const Config& c) {
    std::string error;
    std::unique_ptr<HttpServer> server = LoadHttpServer(&error);
    if (server != nullptr &&
        !server->Listen(c.http_host, static_cast<int>(c.http_port), &error)) {
      error = "cannot listen on " + HostPort(c.http_host, static_cast<int>(c.http_port)) + ": " +
              error;
      server.reset();
    }
    if (server == nullptr) {
      agent::BadOption(kName, "http", c.http_option, error);
      return nullptr;
    }
    const std::string where = HostPort(c.http_host, server->port());
    std::fprintf(stderr, "heapprof: serving http://%s/debug/pprof/heap\n", where.c_str());
    if (c.http_host.compare(0, 4, "127.") != 0 && c.http_host != "::1") {
      std::fprintf(stderr,
                   "heapprof: warning: profiles are served to anyone who can reach %s "
                   "(no authentication)\n",
                   where.c_str());
    }
    return server;
  }

  // File names relative to the program's directory (common/program.h), so
  // that labels read "leaky_cache.mv:53"; the profile's comments name the
  // directory for `go tool pprof -source_path`.
  static agent::SiteTable::Snapshot RelativeToProgram(const agent::SiteTable::Snapshot& sites) {
    const agent::ProgramInfo& program = agent::CurrentProgram();
    agent::SiteTable::Snapshot shown = sites;
    for (agent::Frame& f : shown.frames) f.file = agent::RelativeToProgram(program, f.file);
    return shown;
  }

  // When liveness was last established, for the summary and the profile's
  // comments.
  struct LiveNote {
    std::string summary;  // completes "N MiB live ..."
    std::string comment;  // a profile comment
    uint64_t as_of = 0;   // the collection in-use data is as of; 0: as recorded
  };

  // retained=N: moves the live samples of the top N sites (by live bytes)
  // into rows labelled with the root and first links of their shortest
  // path from a GC root (one search for all: common/retention.h).
  void LabelRetention(vmtiEnv* env, const LiveNote& note, std::vector<Row>* rows) {
    if (walk_env_ == nullptr) return;
    std::vector<uint32_t> order(rows->size());
    for (uint32_t i = 0; i < order.size(); i++) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return (*rows)[a].totals.inuse_bytes > (*rows)[b].totals.inuse_bytes;
    });
    order.resize(std::min<size_t>(order.size(), static_cast<size_t>(config_.retained)));
    while (!order.empty() && (*rows)[order.back()].totals.inuse_bytes <= 0) order.pop_back();
    const uint64_t as_of = note.as_of > 0 ? note.as_of : 0;
    const std::vector<std::pair<int64_t, uint32_t>> tags =
        data_.LiveTags(order, as_of, kRetainedSamplesPerSite);
    std::vector<std::vector<vmtiLong>> queries;
    for (const auto& t : tags) queries.push_back({t.first});
    const agent::RetentionResult paths =
        agent::FindRetentionPaths(env, walk_env_, queries, config_.path_budget);
    if (paths.unsupported) return;
    std::unordered_map<int64_t, std::pair<std::string, std::string>> label_of;
    for (size_t i = 0; i < tags.size(); i++) {
      const agent::RetentionPath& p = paths.paths[i];
      if (p.status != agent::RetentionPath::Status::kFound) continue;
      label_of[tags[i].first] = {p.links[0], p.Prefix(kRetainedLinks)};
    }
    data_.SplitByRetention(rows, as_of, label_of);
    std::fprintf(stderr,
                 "heapprof: retention labels (root, retained_by) on %zu of %zu live samples of "
                 "the top %zu sites; paths to GC roots: %s objects visited in a pause of %.1f "
                 "ms%s%s%s\n",
                 label_of.size(), tags.size(), order.size(),
                 agent::WithCommas(paths.visited).c_str(), paths.pause_ms,
                 paths.cut_off ? ", cut off" : "", paths.error.empty() ? "" : "; ",
                 paths.error.c_str());
  }

  void CopyRows(const LiveNote& note, std::vector<Row>* rows) const {
    if (note.as_of > 0) {
      data_.CopyLiveAsOf(rows, note.as_of);
    } else {
      data_.Copy(rows);
    }
  }

  // gc=1: a full collection now, so that in-use data is exact up to
  // sampling (its ObjectFree events have been delivered when
  // ForceGarbageCollection returns). gc=0, or a collection that could not
  // run: no collection, and the note says when the last one ran. Must be
  // called with no agent lock held (see .live).
  LiveNote CollectForLiveData(vmtiEnv* env, const char* when) {
    // WRONG_PHASE is expected, not an error: the VM is ending on another
    // thread (a dump the worker drains during VMDeath).
    uint64_t number = 0;
    bool forced = false;
    if (config_.gc) {
      const vmtiError err = ForceCollection(env, &number);
      forced = err == VMTI_ERROR_NONE;
      if (!forced && err != VMTI_ERROR_WRONG_PHASE) log_.Check(env, err, "ForceGarbageCollection");
    }
    if (forced) {
      LiveNote note;
      // In-use data counts only samples born before this collection (other
      // threads ran on meanwhile, and it has not judged theirs). 0 if the
      // collection did not report itself: then the data is as recorded.
      note.as_of = number;
      note.summary = std::string("after a full collection ") + when;
      note.comment = "inuse: objects reachable at a full collection run just before this profile";
      return note;
    }
    return LastCollectionNote();
  }

  // ForceGarbageCollection, and the number of the collection it ran in
  // *number (0 if it reported none).
  vmtiError ForceCollection(vmtiEnv* env, uint64_t* number) {
    tl_forcing = this;
    tl_forced_gc = 0;
    const vmtiError err = (*env)->ForceGarbageCollection(env);
    tl_forcing = nullptr;
    *number = err == VMTI_ERROR_NONE ? tl_forced_gc : 0;
    return err;
  }

  LiveNote LastCollectionNote() const {
    LiveNote note;
    const uint64_t n = gc_count_.load(std::memory_order_acquire);
    if (n == 0) {
      note.summary = "(no collection has run: every sampled object counts as live)";
      note.comment = "inuse: no collection has run, so every sampled object counts as live";
      return note;
    }
    const std::chrono::steady_clock::time_point last{
        std::chrono::steady_clock::duration(last_gc_ns_.load(std::memory_order_relaxed))};
    char buf[160];
    std::snprintf(buf, sizeof buf, "as of the last collection (#%llu, %.2f s before this)",
                  static_cast<unsigned long long>(n), SecondsSince(last));
    note.summary = buf;
    note.comment = std::string("inuse: ") + buf +
                   "; objects that died since still count as live (heapprof gc=0)";
    return note;
  }

  // gdump: after each collection (seen at the next sample, which runs after
  // the collection's ObjectFree events), a dump when the estimated live heap
  // exceeds its previous maximum by the fraction. No collection is forced:
  // the dump is of the collection that set the new high-water mark.
  void CheckHighWater() {
    const uint64_t gcs = gc_count_.load(std::memory_order_acquire);
    if (gcs == gdump_seen_gc_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> g(gdump_mu_);
    if (gcs == gdump_seen_gc_.load(std::memory_order_relaxed)) return;
    gdump_seen_gc_.store(gcs, std::memory_order_relaxed);
    const double live = data_.inuse_bytes();
    if (live <= 0 || live <= gdump_max_ * (1 + config_.gdump)) return;
    gdump_max_ = live;
    char why[96];
    std::snprintf(why, sizeof why, "gdump, est. %s live after collection #%llu",
                  agent::HumanBytes(live).c_str(), static_cast<unsigned long long>(gcs));
    LiveNote note;
    note.summary = std::string("right after collection #") + std::to_string(gcs);
    note.comment = "inuse: as of collection #" + std::to_string(gcs) +
                   ", which set a new high-water mark (heapprof gdump; no collection forced)";
    note.as_of = gcs;
    Enqueue(why, &note);
  }

  // A profile's comments: what wrote it, for which program, and how live
  // its in-use values are.
  std::vector<std::string> ProfileComments(const std::string& what, const std::string& live) const {
    const agent::ProgramInfo& program = agent::CurrentProgram();
    std::vector<std::string> comments;
    comments.push_back("minivm heapprof, " + what);
    if (attached_) {
      comments.push_back(
          "attached to the running VM (minivm-attach): objects allocated before the attach are "
          "not in this profile; the allocations after it are sampled without bias");
    }
    if (!program.command_line.empty()) comments.push_back("command: " + program.command_line);
    if (!program.dir.empty()) {
      comments.push_back("source files are relative to " + program.dir +
                         " (go tool pprof -source_path=" + program.dir + " for -list)");
    }
    comments.push_back(live);
    return comments;
  }

  static std::string MainBinary() {
    const agent::ProgramInfo& program = agent::CurrentProgram();
    return program.path.empty() ? "minivm" : program.path;
  }

  bool Write(const std::string& path, const std::vector<Row>& rows,
             const agent::SiteTable::Snapshot& sites, const LiveNote& note, const char* what) {
    std::string data;
    if (config_.collapsed) {
      data = BuildCollapsed(rows, sites, config_.collapsed_inuse);
    } else {
      data = BuildPprof(rows, RelativeToProgram(sites), interval_.load(), ProfileKind::kHeap,
                        ProfileComments(what, note.comment), MainBinary());
    }
    if (data.empty() && !config_.collapsed) {
      std::fprintf(stderr, "heapprof: could not encode the profile\n");
      return false;
    }
    std::string error;
    if (!agent::WriteOutput(path, data, &error)) {
      std::fprintf(stderr, "heapprof: %s\n", error.c_str());
      agent::NoteOutputFailed();
      return false;
    }
    return true;
  }

  // A numbered dump. Its state is copied when it is queued, or (a dump
  // requested with gc=1) by the worker, after the collection it forces.
  struct PendingDump {
    std::string why;
    bool copied = false;
    LiveNote note;
    double allocated = 0;
    std::vector<Row> rows;
    agent::SiteTable::Snapshot sites;
  };

  // A dump of the state after a forced collection (gc=1), or of the state
  // now (gc=0).
  void Request(const char* why) {
    if (config_.gc) {
      Enqueue(why, nullptr);
    } else {
      const LiveNote note = LastCollectionNote();
      Enqueue(why, &note);
    }
  }

  // copy_with: copy the state now, with that note; null: the worker
  // collects and copies.
  void Enqueue(const std::string& why, const LiveNote* copy_with) {
    PendingDump d;
    d.why = why;
    if (copy_with != nullptr) Copy(&d, *copy_with);
    std::lock_guard<std::mutex> g(worker_mu_);
    if (queue_.size() >= kMaxQueued) {
      dropped_dumps_++;  // the worker is far behind: keep memory bounded
      return;
    }
    queue_.push_back(std::move(d));
    worker_cv_.notify_one();
  }

  // dump_every's copies owed to this thread (or, at VMDeath, to any):
  // their collections' events are in by now.
  void TakeOwedDumps(bool any_thread) {
    std::vector<LiveNote> notes;
    {
      std::lock_guard<std::mutex> g(worker_mu_);
      if (owed_dumps_.empty()) return;
      auto taken = std::stable_partition(owed_dumps_.begin(), owed_dumps_.end(), [&](const OwedDump& o) {
        return !any_thread && o.thread != std::this_thread::get_id();
      });
      for (auto it = taken; it != owed_dumps_.end(); ++it) notes.push_back(std::move(it->note));
      owed_dumps_.erase(taken, owed_dumps_.end());
    }
    for (const LiveNote& note : notes) Enqueue("dump_every", &note);
  }

  void Copy(PendingDump* d, LiveNote note) {
    d->copied = true;
    d->note = std::move(note);
    d->allocated = data_.allocated_bytes();
    CopyRows(d->note, &d->rows);
    sites_.Copy(&d->sites);
  }

  void DumpNumbered(PendingDump& d) {
    if (!d.copied) Copy(&d, CollectForLiveData(env_, "for this dump"));
    std::string base =
        config_.file.empty() ? (config_.collapsed ? "heap.folded" : "heap.pb.gz") : config_.file;
    const int seq = ++dump_seq_;
    std::string path = agent::NumberedPath(base, seq);
    const std::string what = "dump " + std::to_string(seq) + " (" + d.why + ")";
    if (Write(path, d.rows, d.sites, d.note, what.c_str())) {
      std::fprintf(stderr, "heapprof: wrote %s (%s, est. %s allocated)\n", path.c_str(),
                   d.why.c_str(), agent::HumanBytes(d.allocated).c_str());
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
      const uint64_t signals = Sigusr2Count();
      if (signals != sigusr2_seen_) {
        sigusr2_seen_ = signals;
        why = "SIGUSR2";
      }
      if (!config_.control.empty() && access(config_.control.c_str(), F_OK) == 0) {
        unlink(config_.control.c_str());
        why = "control file";
      }
      if (why != nullptr) {
        lk.unlock();
        Request(why);
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

  // The endpoints see the profiler only through a ProfileSource.
  void StartHttp() {
    ProfileSource source;
    // A request runs on one server thread: `collect` then `snapshot`. The
    // collection's number, kept per thread between the two, makes the
    // snapshot's in-use data exact as of it (HeapData::CopyLiveAsOf).
    source.snapshot = [this](std::vector<Row>* rows, agent::SiteTable::Snapshot* sites) {
      if (rows != nullptr) {
        if (tl_http_as_of > 0) {
          data_.CopyLiveAsOf(rows, tl_http_as_of);
        } else {
          data_.Copy(rows);
        }
      }
      tl_http_as_of = 0;
      agent::SiteTable::Snapshot raw;
      sites_.Copy(&raw);
      *sites = RelativeToProgram(raw);
    };
    source.collect = [this] {
      if (dead_.load(std::memory_order_acquire)) return false;
      uint64_t number = 0;
      const bool ok = log_.Check(env_, ForceCollection(env_, &number), "ForceGarbageCollection");
      tl_http_as_of = ok ? number : 0;
      return ok;
    };
    source.interval = [this] { return static_cast<int64_t>(interval_.load()); };
    source.comments = [this](const std::string& what, bool collected) {
      std::string live;
      if (collected) {
        live = "inuse: objects reachable at the full collection ?gc=1 ran just before this";
      } else if (gc_count_.load(std::memory_order_acquire) == 0) {
        live = LastCollectionNote().comment;
      } else {
        live = "inuse: " + LastCollectionNote().summary +
               "; objects that died since still count as live (?gc=1 collects first)";
      }
      return ProfileComments(what, live);
    };
    source.main_binary = MainBinary();
    auto handler = std::make_shared<PprofHandler>(
        std::move(source), [this](int64_t seconds) { return http_->Sleep(seconds); },
        HttpServer::kWriteTimeoutSeconds);
    http_->Start([handler](const HttpRequest& r) { return handler->Handle(r); });
  }

  Config config_;
  agent::ErrorLog log_;
  vmtiEnv* const env_;
  vmtiEnv* const walk_env_;  // retained=: the path search's scratch tags, or null
  agent::ThreadFilter threads_;
  agent::SiteTable sites_;
  HeapData data_;
  std::unique_ptr<HttpServer> http_;  // with http= only
  std::atomic<int64_t> next_tag_{1};
  std::atomic<int64_t> interval_{0};  // this environment's (see the constructor)
  std::atomic<bool> dead_{false};
  uint64_t sigusr2_seen_ = 0;  // the worker's
  std::atomic<uint64_t> gc_count_{0};
  std::atomic<int64_t> last_gc_ns_{0};  // steady_clock, of the last GarbageCollectionFinish
  std::mutex gdump_mu_;
  std::atomic<uint64_t> gdump_seen_gc_{0};
  double gdump_max_ = 0;  // guarded by gdump_mu_
  std::mutex worker_mu_;
  std::condition_variable worker_cv_;
  static constexpr size_t kMaxQueued = 64;
  std::deque<PendingDump> queue_;  // guarded by worker_mu_
  struct OwedDump {
    std::thread::id thread;  // whose callback forced its collection
    LiveNote note;
  };
  std::vector<OwedDump> owed_dumps_;  // guarded by worker_mu_
  int64_t dropped_dumps_ = 0;      // guarded by worker_mu_
  bool worker_stop_ = false;
  double next_dump_at_ = 0;
  std::atomic<int> dump_seq_{0};  // the worker's, and an attach dump's
  std::thread worker_;
  bool attached_ = false;  // set before Install (MarkAttached), then read only
};

// Serialises minivm-attach's actions (.attach).
std::mutex g_attach_mu;

}  // namespace
}  // namespace heapprof

VMTI_EXPORT vmtiInt Agent_OnLoad(vmtiVM* vm, char* options, void*) {
  return agent::Start<heapprof::Profiler>(vm, options);
}

// minivm-attach PID load heapprof=[start,]OPTIONS | dump[,name=N][,file=PATH]
// | set[,name=N],interval=BYTES | stop[,name=N] (.attach, .names).
VMTI_EXPORT vmtiInt Agent_OnAttach(vmtiVM* vm, char* options, void*) {
  using namespace heapprof;
  const std::string text = options != nullptr ? options : "";
  const size_t comma = text.find(',');
  std::string action = text.substr(0, comma);
  std::string rest = comma == std::string::npos ? "" : text.substr(comma + 1);
  if (action != "start" && action != "dump" && action != "set" && action != "stop") {
    action = "start";  // plain options: start with them
    rest = text;
  }
  std::lock_guard<std::mutex> g(g_attach_mu);
  if (action == "start") {
    // A second profiler is asked for by name: a plain `load heapprof` while
    // one runs is the mistake of someone who meant to dump it.
    agent::OptionList given;
    std::string bad;
    bool named = false;
    if (agent::SplitOptions(rest.c_str(), &given, &bad)) {
      for (const auto& kv : given) named = named || kv.first == "name";
    }
    if (const std::string running = Instances::Get().Names(); !named && !running.empty()) {
      std::fprintf(stderr,
                   "heapprof: already running (%s): use dump, set or stop, or give a second "
                   "one a name=NAME\n",
                   running.c_str());
      return 1;
    }
    return agent::Attach<Profiler>(vm, rest.c_str());
  }
  std::string name, file;
  int64_t interval = -1;
  agent::OptionParser parser(kName);
  parser.Text("name", &name, "the name of a running heapprof");
  if (action == "dump") agent::DeclareOutputOption(&parser, "file", &file);
  if (action == "set") {
    parser.Interval(&interval);
    parser.Require("interval", "set,interval=BYTES");
  }
  if (!parser.ParseOrReport(rest.c_str())) return 1;
  std::string why;
  Profiler* profiler = Instances::Get().Find(name, &why);
  if (profiler == nullptr) {
    std::fprintf(stderr, "heapprof: '%s': %s\n", action.c_str(), why.c_str());
    return 1;
  }
  if (action == "dump") {
    profiler->DumpNow(file);
    return 0;
  }
  if (action == "set") return profiler->SetInterval(interval) ? 0 : 1;
  profiler->Stop();
  return 0;
}

// After every agent's VMDeath: a profile that could not be written fails
// the run, so that scripts notice (the summary said which and why).
VMTI_EXPORT void Agent_OnUnload(vmtiVM*) { agent::ExitIfOutputFailed(); }
