// fake_vm: a deterministic stand-in VM that implements the part of VMTI the
// tool agents use, so that they can be tested (golden output, statistics,
// lifecycles) independently of the interpreter and collector, and before the
// real agent API is wired.
//
// It loads one or more agents like minivm does (-agentpath:LIB=OPTS), runs
// a scripted workload of allocation sites with known sizes and lifetimes on
// two fake threads (main, thread-1), samples it as the contract says (a
// Poisson process over each thread's allocated bytes, Horvitz-Thompson
// weights), runs "young collections" every --young bytes (objects past
// their lifetime die: ObjectFree; the others are promoted after surviving
// one: ObjectPromote), and prints the truth as JSON lines on stdout:
//   {"truth":"site","site":"remember
//   leak.mv:31","class":"Entry","bytes":..,"objects":..,"live_bytes":..}
//
//   fake_vm [--workload steady|leak|mixed] [--scale N] [--seed S]
//           [--young BYTES] [--spin SECONDS] [--gc-ns N] [--awkward-names]
//           [--idle SECONDS] [--rounds N] -agentpath:LIB[=OPTS]...
//
// Its clock (GetTime) is virtual, so that agents' time-based decisions
// (leakcheck's pacer) are deterministic: 1 ns per byte allocated (a program
// allocating 1 GB/s) plus --gc-ns (default 0) per collection.
//
// --rounds: the workload's rounds (default 20000 x scale).
// --idle: after the workload, allocate nothing for that long before VM
// death, having printed on stderr, per site (leaf frame), the bytes of the
// sampled objects alive now and of those that the next collection leaves:
//   fake_vm: idle {"render fake.mv:12": [LIVE, LIVE_AFTER_GC], ...}
// (--idle=stdin: until stdin is closed, so that a test decides when).
// ForceGarbageCollection may come from an agent's own thread (heapprof's
// ?gc=1): the workload runs under g_vm_mu, which the forced collection takes.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <memory>
#include <vector>

#include "vmti/vmti.h"

namespace {

// ---- The program being "run" -------------------------------------------

struct Method {
  const char* name;
  const char* file;
};
struct SiteSpec {
  std::vector<std::pair<int, int>> stack;  // (method index, line), innermost first
  int klass;                               // index into kClasses
  std::vector<int64_t> sizes;              // cycled
  int lifetime;                            // young collections survived; -1: forever
  int weight;                              // allocations per round
};

const char* const kClasses[] = {"Node", "Array", "Bytes", "String", "Entry"};
const Method kMethods[] = {
    {"main", "fake.mv"},     {"handle", "fake.mv"},    {"render", "fake.mv"},
    {"remember", "fake.mv"}, {"make_tree", "fake.mv"}, {"worker", "fake.mv"},
};

std::vector<SiteSpec> Workload(const std::string& name) {
  std::vector<SiteSpec> w = {
      // render: short-lived garbage
      {{{2, 12}, {1, 20}, {0, 40}}, 2, {280}, 0, 3},
      {{{2, 13}, {1, 20}, {0, 40}}, 3, {64, 96}, 0, 3},
      // make_tree: survives two collections, then dies (promoted, then freed)
      {{{4, 5}, {0, 42}}, 0, {32}, 2, 4},
  };
  if (name == "leak" || name == "mixed") {
    // remember: every entry stays reachable (the leak)
    w.push_back({{{3, 31}, {1, 22}, {0, 40}}, 4, {48}, -1, 1});
    w.push_back({{{1, 21}, {0, 40}}, 3, {80}, -1, 1});
  }
  if (name == "mixed") {
    // one site with a wide mix of sizes, to test the unbiased estimates
    w.push_back({{{5, 50}, {0, 44}}, 1, {24, 1000, 100000, 3000000}, 0, 2});
  }
  return w;
}

// ---- VM state -------------------------------------------------------------

struct FakeThread {
  std::string name;
  int64_t id;
  std::mt19937_64 rng;
  double remaining;                // bytes to the next sample point
  const SiteSpec* site = nullptr;  // what it is allocating now (for stacks)
};

struct Object {
  int site;
  int64_t size;
  int gcs_left;  // -1: immortal
  bool young;
  std::map<void*, vmtiLong> tags;  // per env
};

struct Env;
struct Vm {
  vmtiPhase phase = VMTI_PHASE_ONLOAD;
  int64_t interval = 524288;
  std::vector<Env*> envs;
  std::vector<FakeThread> threads;
  FakeThread* current = nullptr;
  std::vector<SiteSpec> sites;
  std::unordered_map<int64_t, Object> objects;  // sampled, alive
  int64_t next_object = 1;
  bool in_gc = false;
  // VMDeath has begun: collections forced from other threads do nothing.
  bool dying = false;
  std::thread::id dying_thread;
  // the sample being reported
  bool in_sample = false;
  int64_t sample_id = 0;  // the object being reported: a root
  vmtiSampleInfo sample{};
} g_vm;

struct Env {
  const vmtiInterface_1* functions;  // must be first: vmtiEnv layout
  vmtiCapabilities caps{};
  vmtiEventCallbacks cb{};
  bool global[VMTI_MAX_EVENT_TYPE_VAL + 1] = {};
  std::map<vmtiThread, bool> per_thread;  // sampled alloc only
  std::atomic<const void*> local_storage{nullptr};  // read by agents' own threads too
};

Env* E(vmtiEnv* env) { return reinterpret_cast<Env*>(env); }
vmtiThread ThreadHandle(FakeThread* t) { return reinterpret_cast<vmtiThread>(t); }
FakeThread* ThreadOf(vmtiThread t) {
  if (t == nullptr) return g_vm.current;
  for (auto& ft : g_vm.threads) {
    if (reinterpret_cast<vmtiThread>(&ft) == t) return &ft;
  }
  return nullptr;
}

char* Dup(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// --awkward-names: every name the VM reports (class, function, source file,
// thread) ends with bytes that a writer of JSON must escape or replace: a
// quote, a backslash, control characters, and bytes that are not UTF-8 (a
// lone 0xff, a truncated two-byte sequence).
std::string g_name_suffix;
char* DupName(const std::string& s) { return Dup(s + g_name_suffix); }

#define LIVE_ONLY() \
  if (g_vm.phase != VMTI_PHASE_LIVE || g_vm.in_gc) return VMTI_ERROR_WRONG_PHASE

vmtiError GetVersionNumber(vmtiEnv*, vmtiInt* v) {
  if (!v) return VMTI_ERROR_NULL_POINTER;
  *v = VMTI_VERSION_1_0;
  return VMTI_ERROR_NONE;
}
vmtiError GetPhase(vmtiEnv*, vmtiPhase* p) {
  if (!p) return VMTI_ERROR_NULL_POINTER;
  *p = g_vm.phase;
  return VMTI_ERROR_NONE;
}
vmtiError GetErrorName(vmtiEnv*, vmtiError e, char** n) {
  if (!n) return VMTI_ERROR_NULL_POINTER;
#define NAME_(name, value)         \
  if (e == value) {                \
    *n = Dup("VMTI_ERROR_" #name); \
    return VMTI_ERROR_NONE;        \
  }
  VMTI_ERRORS(NAME_)
#undef NAME_
  *n = nullptr;
  return VMTI_ERROR_ILLEGAL_ARGUMENT;
}
vmtiError Allocate(vmtiEnv*, vmtiLong s, unsigned char** m) {
  if (!m) return VMTI_ERROR_NULL_POINTER;
  *m = s == 0 ? nullptr : static_cast<unsigned char*>(std::malloc(s));
  return VMTI_ERROR_NONE;
}
vmtiError Deallocate(vmtiEnv*, unsigned char* m) {
  std::free(m);
  return VMTI_ERROR_NONE;
}
vmtiError NotAvail0(vmtiEnv*) { return VMTI_ERROR_NOT_AVAILABLE; }
vmtiError GetPotentialCapabilities(vmtiEnv*, vmtiCapabilities* c) {
  std::memset(c, 0, sizeof *c);
  c->can_generate_sampled_alloc_events = c->can_tag_objects = c->can_generate_object_free_events =
      c->can_generate_object_promote_events = c->can_generate_garbage_collection_events = 1;
  return VMTI_ERROR_NONE;
}
vmtiError AddCapabilities(vmtiEnv* env, const vmtiCapabilities* c) {
  if (!c) return VMTI_ERROR_NULL_POINTER;
  Env* e = E(env);
  e->caps.can_generate_sampled_alloc_events |= c->can_generate_sampled_alloc_events;
  e->caps.can_tag_objects |= c->can_tag_objects;
  e->caps.can_generate_object_free_events |= c->can_generate_object_free_events;
  e->caps.can_generate_object_promote_events |= c->can_generate_object_promote_events;
  e->caps.can_generate_garbage_collection_events |= c->can_generate_garbage_collection_events;
  return VMTI_ERROR_NONE;
}
vmtiError GetCapabilities(vmtiEnv* env, vmtiCapabilities* c) {
  *c = E(env)->caps;
  return VMTI_ERROR_NONE;
}
vmtiError SetEventCallbacks(vmtiEnv* env, const vmtiEventCallbacks* cb, vmtiInt size) {
  Env* e = E(env);
  std::memset(&e->cb, 0, sizeof e->cb);
  if (cb) std::memcpy(&e->cb, cb, std::min<size_t>(size, sizeof e->cb));
  return VMTI_ERROR_NONE;
}
vmtiError SetEventNotificationMode(vmtiEnv* env, vmtiEventMode mode, vmtiEvent ev, vmtiThread t) {
  Env* e = E(env);
  if (ev < VMTI_MIN_EVENT_TYPE_VAL || ev > VMTI_MAX_EVENT_TYPE_VAL)
    return VMTI_ERROR_INVALID_EVENT_TYPE;
  if (ev == VMTI_EVENT_SAMPLED_OBJECT_ALLOC && !e->caps.can_generate_sampled_alloc_events)
    return VMTI_ERROR_MUST_POSSESS_CAPABILITY;
  if (ev == VMTI_EVENT_OBJECT_FREE && !e->caps.can_generate_object_free_events)
    return VMTI_ERROR_MUST_POSSESS_CAPABILITY;
  if (ev == VMTI_EVENT_OBJECT_PROMOTE && !e->caps.can_generate_object_promote_events)
    return VMTI_ERROR_MUST_POSSESS_CAPABILITY;
  if ((ev == VMTI_EVENT_GARBAGE_COLLECTION_START || ev == VMTI_EVENT_GARBAGE_COLLECTION_FINISH) &&
      !e->caps.can_generate_garbage_collection_events)
    return VMTI_ERROR_MUST_POSSESS_CAPABILITY;
  if (t != nullptr) {
    if (g_vm.phase != VMTI_PHASE_LIVE) return VMTI_ERROR_WRONG_PHASE;
    if (ev != VMTI_EVENT_SAMPLED_OBJECT_ALLOC && ev != VMTI_EVENT_THREAD_START &&
        ev != VMTI_EVENT_THREAD_END)
      return VMTI_ERROR_ILLEGAL_ARGUMENT;
    if (!ThreadOf(t)) return VMTI_ERROR_INVALID_THREAD;
    e->per_thread[t] = mode == VMTI_ENABLE;
    return VMTI_ERROR_NONE;
  }
  e->global[ev] = mode == VMTI_ENABLE;
  return VMTI_ERROR_NONE;
}
vmtiError SetHeapSamplingInterval(vmtiEnv* env, vmtiInt i) {
  if (!E(env)->caps.can_generate_sampled_alloc_events) return VMTI_ERROR_MUST_POSSESS_CAPABILITY;
  if (i < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  g_vm.interval = i;
  return VMTI_ERROR_NONE;
}
vmtiError GetHeapSamplingInterval(vmtiEnv*, vmtiInt* i) {
  *i = static_cast<vmtiInt>(g_vm.interval);
  return VMTI_ERROR_NONE;
}
vmtiError GetCurrentThread(vmtiEnv*, vmtiThread* t) {
  LIVE_ONLY();
  if (!g_vm.current) return VMTI_ERROR_INVALID_THREAD;
  *t = ThreadHandle(g_vm.current);
  return VMTI_ERROR_NONE;
}
vmtiError GetThreadInfo(vmtiEnv*, vmtiThread t, vmtiThreadInfo* info) {
  LIVE_ONLY();
  FakeThread* ft = ThreadOf(t);
  if (!ft) return VMTI_ERROR_INVALID_THREAD;
  info->name = DupName(ft->name);
  info->id = ft->id;
  return VMTI_ERROR_NONE;
}
vmtiError GetAllThreads(vmtiEnv*, vmtiInt*, vmtiThread**) { return VMTI_ERROR_NOT_AVAILABLE; }
// The fake threads: main spawned thread-1.
vmtiError GetThreadParent(vmtiEnv*, vmtiThread t, vmtiThread* parent) {
  LIVE_ONLY();
  FakeThread* ft = ThreadOf(t);
  if (!ft) return VMTI_ERROR_INVALID_THREAD;
  if (!parent) return VMTI_ERROR_NULL_POINTER;
  *parent = ft->id == 0 ? nullptr : ThreadHandle(&g_vm.threads[0]);
  return VMTI_ERROR_NONE;
}
vmtiError GetStackTrace(vmtiEnv*, vmtiThread t, vmtiInt start, vmtiInt max, vmtiFrameInfo* f,
                        vmtiInt* count) {
  LIVE_ONLY();
  FakeThread* ft = ThreadOf(t);
  if (ft != g_vm.current || !ft) return VMTI_ERROR_NOT_AVAILABLE;
  if (!f || !count) return VMTI_ERROR_NULL_POINTER;
  if (max < 0 || start < 0) return VMTI_ERROR_ILLEGAL_ARGUMENT;
  const auto& st = ft->site->stack;
  int n = 0;
  for (size_t i = start; i < st.size() && n < max; i++, n++) {
    f[n].method = reinterpret_cast<vmtiMethodID>(const_cast<Method*>(&kMethods[st[i].first]));
    f[n].location = st[i].second * 4;  // "bytecode offset": 4 bytes per line
  }
  *count = n;
  return VMTI_ERROR_NONE;
}
const Method* MethodOf(vmtiMethodID m) {
  for (const Method& x : kMethods)
    if (reinterpret_cast<const void*>(&x) == reinterpret_cast<const void*>(m)) return &x;
  return nullptr;
}
vmtiError GetMethodName(vmtiEnv*, vmtiMethodID m, char** name, char** sig, char** gen) {
  LIVE_ONLY();
  const Method* x = MethodOf(m);
  if (!x) return VMTI_ERROR_INVALID_METHODID;
  if (name) *name = DupName(x->name);
  if (sig) *sig = Dup("(0)");
  if (gen) *gen = nullptr;
  return VMTI_ERROR_NONE;
}
vmtiError GetLineNumber(vmtiEnv*, vmtiMethodID m, vmtiLocation loc, vmtiInt* line) {
  LIVE_ONLY();
  if (!MethodOf(m)) return VMTI_ERROR_INVALID_METHODID;
  *line = static_cast<vmtiInt>(loc / 4);
  return VMTI_ERROR_NONE;
}
vmtiError GetMethodSourceFile(vmtiEnv*, vmtiMethodID m, char** file) {
  LIVE_ONLY();
  const Method* x = MethodOf(m);
  if (!x) return VMTI_ERROR_INVALID_METHODID;
  *file = DupName(x->file);
  return VMTI_ERROR_NONE;
}
int64_t ObjectId(vmtiObject o) { return reinterpret_cast<intptr_t>(o); }
Object* ObjectOf(vmtiObject o) {
  auto it = g_vm.objects.find(ObjectId(o));
  return it == g_vm.objects.end() ? nullptr : &it->second;
}
vmtiError GetObjectClass(vmtiEnv*, vmtiObject o, vmtiClass* k) {
  LIVE_ONLY();
  Object* ob = ObjectOf(o);
  if (!ob) return VMTI_ERROR_INVALID_OBJECT;
  *k = reinterpret_cast<vmtiClass>(const_cast<char*>(kClasses[g_vm.sites[ob->site].klass]));
  return VMTI_ERROR_NONE;
}
vmtiError GetClassSignature(vmtiEnv*, vmtiClass k, char** sig, char** gen) {
  LIVE_ONLY();
  for (const char* c : kClasses) {
    if (reinterpret_cast<vmtiClass>(const_cast<char*>(c)) == k) {
      if (sig) *sig = DupName(c);
      if (gen) *gen = nullptr;
      return VMTI_ERROR_NONE;
    }
  }
  return VMTI_ERROR_INVALID_CLASS;
}
vmtiError GetObjectSize(vmtiEnv*, vmtiObject o, vmtiLong* s) {
  LIVE_ONLY();
  Object* ob = ObjectOf(o);
  if (!ob) return VMTI_ERROR_INVALID_OBJECT;
  *s = ob->size;
  return VMTI_ERROR_NONE;
}
vmtiError GetTag(vmtiEnv* env, vmtiObject o, vmtiLong* t) {
  LIVE_ONLY();
  Object* ob = ObjectOf(o);
  if (!ob) return VMTI_ERROR_INVALID_OBJECT;
  *t = ob->tags.count(env) ? ob->tags[env] : 0;
  return VMTI_ERROR_NONE;
}
vmtiError SetTag(vmtiEnv* env, vmtiObject o, vmtiLong t) {
  LIVE_ONLY();
  if (!E(env)->caps.can_tag_objects) return VMTI_ERROR_MUST_POSSESS_CAPABILITY;
  Object* ob = ObjectOf(o);
  if (!ob) return VMTI_ERROR_INVALID_OBJECT;
  if (t == 0)
    ob->tags.erase(env);
  else
    ob->tags[env] = t;
  return VMTI_ERROR_NONE;
}
vmtiError NotAvail2(vmtiEnv*, void*, void*) { return VMTI_ERROR_NOT_AVAILABLE; }
vmtiError NotAvail1(vmtiEnv*, void*) { return VMTI_ERROR_NOT_AVAILABLE; }
vmtiError SetEnvironmentLocalStorage(vmtiEnv* env, const void* data) {
  E(env)->local_storage.store(data);
  return VMTI_ERROR_NONE;
}
vmtiError GetEnvironmentLocalStorage(vmtiEnv* env, void** data) {
  if (!data) return VMTI_ERROR_NULL_POINTER;
  *data = const_cast<void*>(E(env)->local_storage.load());
  return VMTI_ERROR_NONE;
}
vmtiError GetObjectGeneration(vmtiEnv*, vmtiObject o, vmtiGeneration* g) {
  LIVE_ONLY();
  Object* ob = ObjectOf(o);
  if (!ob) return VMTI_ERROR_INVALID_OBJECT;
  *g = ob->young ? VMTI_GENERATION_YOUNG : VMTI_GENERATION_OLD;
  return VMTI_ERROR_NONE;
}
vmtiError GetSampleInfo(vmtiEnv*, vmtiSampleInfo* i) {
  if (!g_vm.in_sample) return VMTI_ERROR_NOT_AVAILABLE;
  *i = g_vm.sample;
  return VMTI_ERROR_NONE;
}
void Collect();
// Held while the workload runs a round and by forced collections, so that a
// collection forced from an agent's thread runs between rounds (as at a
// safepoint). Recursive: an agent may force one from a callback of the
// round (leakcheck gc_every). The workload yields the lock between rounds
// while g_vm_waiters says another thread wants it, as a mutator stops at a
// safepoint that another thread requested: a mutex alone would let the
// workload take it back at once, round after round.
std::recursive_mutex g_vm_mu;
std::atomic<int> g_vm_waiters{0};
vmtiError ForceGarbageCollection(vmtiEnv*) {
  g_vm_waiters.fetch_add(1);
  std::unique_lock<std::recursive_mutex> g(g_vm_mu);
  g_vm_waiters.fetch_sub(1);
  // As minivm's: from another thread than the dying one, no collection.
  if (g_vm.dying && std::this_thread::get_id() != g_vm.dying_thread) {
    return VMTI_ERROR_WRONG_PHASE;
  }
  LIVE_ONLY();
  Collect();
  return VMTI_ERROR_NONE;
}
// The virtual clock (see the top of this file).
std::atomic<int64_t> g_clock_ns{0};
int64_t g_gc_ns = 0;
vmtiError GetTime(vmtiEnv*, vmtiLong* n) {
  if (!n) return VMTI_ERROR_NULL_POINTER;
  *n = g_clock_ns.load();
  return VMTI_ERROR_NONE;
}

vmtiInterface_1 MakeTable() {
  vmtiInterface_1 t;
  std::memset(&t, 0, sizeof t);
  t.GetVersionNumber = GetVersionNumber;
  t.GetPhase = GetPhase;
  t.GetErrorName = GetErrorName;
  t.Allocate = Allocate;
  t.Deallocate = Deallocate;
  t.DisposeEnvironment = NotAvail0;
  t.SetEnvironmentLocalStorage = SetEnvironmentLocalStorage;
  t.GetEnvironmentLocalStorage = GetEnvironmentLocalStorage;
  t.GetPotentialCapabilities = GetPotentialCapabilities;
  t.AddCapabilities = AddCapabilities;
  t.RelinquishCapabilities =
      reinterpret_cast<vmtiError (*)(vmtiEnv*, const vmtiCapabilities*)>(NotAvail1);
  t.GetCapabilities = GetCapabilities;
  t.SetEventCallbacks = SetEventCallbacks;
  t.SetEventNotificationMode = SetEventNotificationMode;
  t.SetHeapSamplingInterval = SetHeapSamplingInterval;
  t.GetHeapSamplingInterval = GetHeapSamplingInterval;
  t.GetCurrentThread = GetCurrentThread;
  t.GetThreadInfo = GetThreadInfo;
  t.GetAllThreads = GetAllThreads;
  t.GetStackTrace = GetStackTrace;
  t.GetMethodName = GetMethodName;
  t.GetLineNumber = GetLineNumber;
  t.GetMethodSourceFile = GetMethodSourceFile;
  t.GetObjectClass = GetObjectClass;
  t.GetClassSignature = GetClassSignature;
  t.GetObjectSize = GetObjectSize;
  t.GetTag = GetTag;
  t.SetTag = SetTag;
  t.NewWeakRef = reinterpret_cast<vmtiError (*)(vmtiEnv*, vmtiObject, vmtiWeak*)>(NotAvail2);
  t.IsWeakRefCleared = reinterpret_cast<vmtiError (*)(vmtiEnv*, vmtiWeak, vmtiBool*)>(NotAvail2);
  t.DeleteWeakRef = reinterpret_cast<vmtiError (*)(vmtiEnv*, vmtiWeak)>(NotAvail1);
  t.GetObjectGeneration = GetObjectGeneration;
  t.GetSampleInfo = GetSampleInfo;
  t.ForceGarbageCollection = ForceGarbageCollection;
  t.GetTime = GetTime;
  t.GetThreadParent = GetThreadParent;
  return t;
}
const vmtiInterface_1 kTable = MakeTable();

// Owns the environments (g_vm.envs only points at them), so that they are
// freed at exit and LeakSanitizer stays quiet in the ASan build.
std::vector<std::unique_ptr<Env>> g_env_storage;

vmtiError GetEnv(vmtiVM*, void** penv, vmtiInt version) {
  if ((version & 0xffff0000) != VMTI_VERSION_1) return VMTI_ERROR_UNSUPPORTED_VERSION;
  Env* e = g_env_storage.emplace_back(std::make_unique<Env>()).get();
  e->functions = &kTable;
  g_vm.envs.push_back(e);
  *penv = e;
  return VMTI_ERROR_NONE;
}
const vmtiVMInterface kVmTable = {nullptr, nullptr, nullptr, GetEnv};
struct {
  const vmtiVMInterface* functions;
} g_vm_handle = {&kVmTable};

// ---- Events ------------------------------------------------------------------

bool Wants(Env* e, vmtiEvent ev, FakeThread* t) {
  if (e->global[ev]) return true;
  if (ev == VMTI_EVENT_SAMPLED_OBJECT_ALLOC && t) {
    auto it = e->per_thread.find(ThreadHandle(t));
    return it != e->per_thread.end() && it->second;
  }
  return false;
}

double Exponential(std::mt19937_64& rng, double mean) {
  double u = (static_cast<double>(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  return -std::log(u) * mean;
}

int64_t PoissonDraw(std::mt19937_64& rng, double mean) {
  if (mean <= 0) return 0;
  std::poisson_distribution<int64_t> d(mean);
  return d(rng);
}

struct SiteTruth {
  double bytes = 0, objects = 0, live_bytes = 0;
  double bytes_var = 0, objects_var = 0;  // of the Horvitz-Thompson estimates
};
std::vector<SiteTruth> g_truth;

void Allocate1(FakeThread* t, int site, int64_t size) {
  const SiteSpec& spec = g_vm.sites[site];
  g_clock_ns += size;
  g_truth[site].bytes += size;
  g_truth[site].objects += 1;
  if (spec.lifetime < 0) g_truth[site].live_bytes += size;
  if (g_vm.interval > 0) {
    double p = -std::expm1(-static_cast<double>(size) / g_vm.interval);
    g_truth[site].bytes_var += static_cast<double>(size) * size * (1 - p) / p;
    g_truth[site].objects_var += (1 - p) / p;
  }
  bool any = false;
  for (Env* e : g_vm.envs)
    any = any || (Wants(e, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, t) && e->cb.SampledObjectAlloc);
  if (!any) return;
  int64_t n = 0;
  double I = static_cast<double>(g_vm.interval);
  if (g_vm.interval == 0) {
    n = 1;
  } else if (size <= t->remaining) {
    t->remaining -= size;
    return;
  } else {
    n = 1 + PoissonDraw(t->rng, (size - t->remaining) / I);
    t->remaining = Exponential(t->rng, I);
  }
  int64_t id = g_vm.next_object++;
  bool large = size >= 1000000;
  g_vm.objects[id] = Object{site, size, spec.lifetime, !large, {}};
  g_vm.in_sample = true;
  g_vm.sample_id = id;
  g_vm.sample.sample_count = n;
  g_vm.sample.interval = static_cast<vmtiInt>(g_vm.interval);
  g_vm.sample.generation = large ? VMTI_GENERATION_OLD : VMTI_GENERATION_YOUNG;
  g_vm.sample.weight = g_vm.interval == 0 ? size : size / -std::expm1(-size / I);
  t->site = &spec;
  for (Env* e : g_vm.envs) {
    if (Wants(e, VMTI_EVENT_SAMPLED_OBJECT_ALLOC, t) && e->cb.SampledObjectAlloc) {
      e->cb.SampledObjectAlloc(reinterpret_cast<vmtiEnv*>(e), ThreadHandle(t),
                               reinterpret_cast<vmtiObject>(static_cast<intptr_t>(id)),
                               reinterpret_cast<vmtiClass>(const_cast<char*>(kClasses[spec.klass])),
                               size);
    }
  }
  g_vm.in_sample = false;
  g_vm.sample_id = 0;
  Object& ob = g_vm.objects[id];
  if (ob.tags.empty()) g_vm.objects.erase(id);  // nobody follows it
}

void Collect() {
  g_clock_ns += g_gc_ns;
  g_vm.in_gc = true;
  for (Env* e : g_vm.envs)
    if (e->global[VMTI_EVENT_GARBAGE_COLLECTION_START] && e->cb.GarbageCollectionStart)
      e->cb.GarbageCollectionStart(reinterpret_cast<vmtiEnv*>(e));
  std::vector<std::pair<int64_t, bool>> found;  // (object, died?)
  for (auto& kv : g_vm.objects) {
    Object& ob = kv.second;
    if (kv.first == g_vm.sample_id) continue;  // held by the running callback
    if (ob.gcs_left == 0) {
      found.emplace_back(kv.first, true);
    } else {
      if (ob.gcs_left > 0) ob.gcs_left--;
      if (ob.young) {
        ob.young = false;
        found.emplace_back(kv.first, false);
      }
    }
  }
  for (Env* e : g_vm.envs)
    if (e->global[VMTI_EVENT_GARBAGE_COLLECTION_FINISH] && e->cb.GarbageCollectionFinish)
      e->cb.GarbageCollectionFinish(reinterpret_cast<vmtiEnv*>(e));
  g_vm.in_gc = false;
  std::sort(found.begin(), found.end());
  for (auto& f : found) {
    Object ob = g_vm.objects[f.first];
    for (auto& tag : ob.tags) {
      Env* e = E(static_cast<vmtiEnv*>(tag.first));
      if (f.second && e->global[VMTI_EVENT_OBJECT_FREE] && e->cb.ObjectFree)
        e->cb.ObjectFree(static_cast<vmtiEnv*>(tag.first), tag.second);
      if (!f.second && e->global[VMTI_EVENT_OBJECT_PROMOTE] && e->cb.ObjectPromote)
        e->cb.ObjectPromote(static_cast<vmtiEnv*>(tag.first), tag.second);
    }
    if (f.second) g_vm.objects.erase(f.first);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string workload = "steady";
  int64_t scale = 1, seed = 0, young = 4 << 20;
  double spin = 0, idle = 0;
  bool idle_stdin = false;
  int64_t rounds = -1;
  std::vector<std::pair<std::string, std::string>> agents;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&](const char* p) {
      return a.compare(0, std::strlen(p), p) == 0 ? a.substr(std::strlen(p)) : std::string("\x01");
    };
    if (val("--workload=") != "\x01")
      workload = val("--workload=");
    else if (val("--scale=") != "\x01")
      scale = std::atoll(val("--scale=").c_str());
    else if (val("--seed=") != "\x01")
      seed = std::atoll(val("--seed=").c_str());
    else if (val("--young=") != "\x01")
      young = std::atoll(val("--young=").c_str());
    else if (val("--spin=") != "\x01")
      spin = std::atof(val("--spin=").c_str());
    else if (val("--gc-ns=") != "\x01")
      g_gc_ns = std::atoll(val("--gc-ns=").c_str());
    else if (a == "--awkward-names")
      g_name_suffix = "\"q\\b\x01\n\t\x7f\xff\xc3(";
    else if (val("--idle=") == "stdin")
      idle_stdin = true;
    else if (val("--idle=") != "\x01")
      idle = std::atof(val("--idle=").c_str());
    else if (val("--rounds=") != "\x01")
      rounds = std::atoll(val("--rounds=").c_str());
    else if (val("-agentpath:") != "\x01") {
      std::string s = val("-agentpath:");
      size_t eq = s.find('=');
      agents.emplace_back(s.substr(0, eq), eq == std::string::npos ? "\x01" : s.substr(eq + 1));
    } else {
      std::fprintf(stderr, "fake_vm: error: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  g_vm.sites = Workload(workload);
  g_truth.resize(g_vm.sites.size());
  g_vm.threads.push_back({"main", 0, std::mt19937_64(seed * 2 + 1), 0});
  g_vm.threads.push_back({"thread-1", 1, std::mt19937_64(seed * 2 + 2), 0});
  for (auto& [path, opts] : agents) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "fake_vm: error: cannot load agent %s: %s\n", path.c_str(), dlerror());
      return 1;
    }
    auto onload = reinterpret_cast<vmtiInt (*)(vmtiVM*, char*, void*)>(dlsym(h, "Agent_OnLoad"));
    if (!onload) {
      std::fprintf(stderr, "fake_vm: error: %s has no Agent_OnLoad\n", path.c_str());
      return 1;
    }
    std::string copy = opts;
    if (onload(reinterpret_cast<vmtiVM*>(&g_vm_handle), opts == "\x01" ? nullptr : &copy[0],
               nullptr) != 0) {
      std::fprintf(stderr, "fake_vm: error: agent %s failed to start\n", path.c_str());
      return 1;
    }
  }
  g_vm.phase = VMTI_PHASE_LIVE;
  for (auto& t : g_vm.threads)
    t.remaining = g_vm.interval == 0 ? 0 : Exponential(t.rng, static_cast<double>(g_vm.interval));
  g_vm.current = &g_vm.threads[0];
  for (Env* e : g_vm.envs)
    if (e->global[VMTI_EVENT_VM_INIT] && e->cb.VMInit)
      e->cb.VMInit(reinterpret_cast<vmtiEnv*>(e), ThreadHandle(&g_vm.threads[0]));
  g_vm.current = &g_vm.threads[1];
  for (Env* e : g_vm.envs)
    if (e->global[VMTI_EVENT_THREAD_START] && e->cb.ThreadStart)
      e->cb.ThreadStart(reinterpret_cast<vmtiEnv*>(e), ThreadHandle(&g_vm.threads[1]));

  // Rounds: every site allocates `weight` objects per round on alternating
  // threads; a young collection every `young` bytes.
  int64_t since_gc = 0;
  if (rounds < 0) rounds = 20000 * scale;
  std::vector<size_t> size_ix(g_vm.sites.size(), 0);
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t r = 0;
       r < rounds ||
       (spin > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < spin);
       r++) {
    std::unique_lock<std::recursive_mutex> round(g_vm_mu);
    FakeThread* t = &g_vm.threads[r % 2];
    g_vm.current = t;
    for (size_t s = 0; s < g_vm.sites.size(); s++) {
      const SiteSpec& spec = g_vm.sites[s];
      for (int k = 0; k < spec.weight; k++) {
        int64_t size = spec.sizes[size_ix[s]++ % spec.sizes.size()];
        Allocate1(t, static_cast<int>(s), size);
        since_gc += size;
        if (since_gc >= young) {
          since_gc = 0;
          Collect();
        }
      }
    }
    round.unlock();
    while (g_vm_waiters.load() > 0) std::this_thread::yield();
    if (spin > 0 && r % 1000 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (idle > 0 || idle_stdin) {
    std::string line = "fake_vm: idle {";
    {
      std::lock_guard<std::recursive_mutex> g(g_vm_mu);
      std::map<std::string, std::pair<int64_t, int64_t>> by_leaf;  // live, live after a GC
      for (size_t s = 0; s < g_vm.sites.size(); s++) {
        const Method& m = kMethods[g_vm.sites[s].stack[0].first];
        by_leaf[std::string(m.name) + " " + m.file + ":" +
                std::to_string(g_vm.sites[s].stack[0].second)];
      }
      for (const auto& kv : g_vm.objects) {
        const SiteSpec& spec = g_vm.sites[kv.second.site];
        const Method& m = kMethods[spec.stack[0].first];
        auto& v = by_leaf[std::string(m.name) + " " + m.file + ":" +
                          std::to_string(spec.stack[0].second)];
        v.first += kv.second.size;
        if (kv.second.gcs_left != 0) v.second += kv.second.size;
      }
      const char* sep = "";
      for (const auto& kv : by_leaf) {
        line += std::string(sep) + "\"" + kv.first + "\": [" + std::to_string(kv.second.first) +
                ", " + std::to_string(kv.second.second) + "]";
        sep = ", ";
      }
    }
    std::fprintf(stderr, "%s}\n", line.c_str());
    std::fflush(stderr);
    if (idle_stdin) {
      char buf[256];
      while (read(0, buf, sizeof buf) > 0) {
      }
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(idle));
    }
  }
  {
    std::lock_guard<std::recursive_mutex> g(g_vm_mu);
    g_vm.dying = true;
    g_vm.dying_thread = std::this_thread::get_id();
  }
  g_vm.current = &g_vm.threads[0];
  for (Env* e : g_vm.envs)
    if (e->global[VMTI_EVENT_VM_DEATH] && e->cb.VMDeath)
      e->cb.VMDeath(reinterpret_cast<vmtiEnv*>(e));
  g_vm.phase = VMTI_PHASE_DEAD;
  for (size_t s = 0; s < g_vm.sites.size(); s++) {
    const SiteSpec& spec = g_vm.sites[s];
    const Method& m = kMethods[spec.stack[0].first];
    std::printf(
        "{\"truth\":\"site\",\"site\":\"%s "
        "%s:%d\",\"class\":\"%s\",\"bytes\":%.0f,\"objects\":%.0f,\"live_bytes\":%.0f,\"bytes_"
        "var\":%.6g,\"objects_var\":%.6g}\n",
        m.name, m.file, spec.stack[0].second, kClasses[spec.klass], g_truth[s].bytes,
        g_truth[s].objects, g_truth[s].live_bytes, g_truth[s].bytes_var, g_truth[s].objects_var);
  }
  return 0;
}
