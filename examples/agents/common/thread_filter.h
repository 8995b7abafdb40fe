// The tool agents' `threads=` option: which threads sample.
//
//   threads=main+thread-2     main and thread-2
//   threads=worker-root++main thread "worker-root" and every thread it
//                              spawns, directly or not; and main
//
// A name followed by an empty name ("NAME+" at the end, or "NAME++" before
// the next name) selects that thread and its descendants: OCaml
// statmemprof's rule that a domain spawned by a profiled domain is
// profiled too. VMTI keeps per-thread enabling as JVMTI has it (not
// inherited), so the agent applies the rule itself: when a thread starts
// (its ThreadStart runs on it, before its first allocation), it is
// selected if its name is wanted or if GetThreadParent names a thread
// selected with its descendants, whose own ThreadStart came first.
#ifndef MINIVM_EXAMPLES_AGENTS_COMMON_THREAD_FILTER_H_
#define MINIVM_EXAMPLES_AGENTS_COMMON_THREAD_FILTER_H_

#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "agent.h"
#include "errors.h"
#include "options.h"
#include "vmti/vmti.h"

namespace agent {

class ThreadFilter {
 public:
  // Parses the option's value; false if malformed (an empty name, a
  // leading '+', three '+' in a row).
  bool Parse(const std::string& text);
  bool empty() const { return wants_.empty(); }

  // The events of an agent with a ThreadStart handler that calls
  // EnableSamplingIfSelected: without threads=, SampledObjectAlloc for every
  // thread and no ThreadStart; with it, ThreadStart instead, which enables
  // SampledObjectAlloc for each selected thread.
  void Configure(Setup* setup) const;

  // Whether `thread` samples; call from VMInit (main) and ThreadStart.
  // Thread-safe.
  bool Select(vmtiEnv* env, vmtiThread thread, ErrorLog* log);
  // Select, and if chosen, enables SampledObjectAlloc for `thread` (with
  // threads=, the agent enables that event per thread, never globally).
  void EnableSamplingIfSelected(vmtiEnv* env, vmtiThread thread, ErrorLog* log);

  // Every thread Select chose so far (to switch their events off again).
  std::vector<vmtiThread> Selected();

 private:
  struct Want {
    std::string name;
    bool descendants = false;
  };
  std::vector<Want> wants_;
  std::mutex mu_;
  std::unordered_set<vmtiThread> roots_;  // selected with descendants; guarded by mu_
  std::vector<vmtiThread> selected_;      // guarded by mu_
};

// Declares the `threads=` option, validated with ThreadFilter::Parse; the
// agent parses *out into its ThreadFilter again once it has one.
void DeclareThreadsOption(OptionParser* options, std::string* out);

}  // namespace agent

#endif  // MINIVM_EXAMPLES_AGENTS_COMMON_THREAD_FILTER_H_
