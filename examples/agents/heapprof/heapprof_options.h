// heapprof's options (-agentlib:heapprof=..., docs/tools.md): what they
// set, and their declaration to the shared option parser (common/options.h).
#ifndef HEAPPROF_HEAPPROF_OPTIONS_H_
#define HEAPPROF_HEAPPROF_OPTIONS_H_

#include <cstdint>
#include <string>

#include "../common/options.h"
#include "../common/retention.h"

namespace heapprof {

struct Config {
  int64_t interval = -1;  // -1: the environment's default (512 KiB)
  std::string name;       // empty: the default (heapprof.cc .names)
  std::string file;
  bool file_given = false;
  bool collapsed = false;
  bool collapsed_inuse = true;
  int64_t dump_every = 0;
  std::string control;
  int64_t http_port = -1;               // -1: no HTTP server
  std::string http_host = "127.0.0.1";  // a numeric address
  std::string http_option;              // as given, for messages
  int64_t depth = 64;
  std::string threads;  // common/thread_filter.h; empty: every thread
  int64_t top = 5;
  bool gc = true;
  double gdump = 0;  // 0: off
  int64_t histo = 0;  // class histogram rows in the exit summary (0: none; -1: all)
  int64_t retained = 0;  // sites whose live samples get retention labels (0: none)
  agent::RetentionBudget path_budget;  // retained=: the path search's budget
};

// Declares every option to `p`, each writing into `c`.
void DeclareOptions(Config* c, agent::OptionParser* p);

}  // namespace heapprof

#endif  // HEAPPROF_HEAPPROF_OPTIONS_H_
