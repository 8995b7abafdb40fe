// minivm-collector's server: the socket, the clients, their ring buffers and
// the profile files. docs/collector.md describes it for users.
//
// Design:
// .one-thread  One thread, one poll() loop (rejected: a reader thread per client,
//     heapprofd's unwinder threads, which pay off when records need heavy
//     work such as unwinding raw stacks; here a record is a few hash-table
//     updates, so one thread keeps up with several VMs and needs no locks).
//     The loop watches a signalfd (SIGUSR1: dump; SIGTERM, SIGINT: stop),
//     the listening socket and every client socket, and wakes at least every
//     kTickMs to drain the rings (the VMs send a wake-up byte only when a
//     ring fills while the collector sleeps, ring_buffer.h .wake-ups).
// .fairness  Fairness: each pass reads at most kDrainBudget records per client, and
//     the loop does not sleep while any client has more.
// .untrusted  A client is untrusted: its hello is validated, its records are
//     validated by RingReader and Session, and any violation ends that
//     connection only (with a final profile saying why). A client that does
//     not finish its handshake in kHandshakeSeconds is dropped.
// .profiles  Profiles: DIR/heap.<pid>.<connection>.<nnnn>.pb.gz for dumps on
//     request (SIGUSR1) and periodic ones (--period; skipped when nothing
//     changed), DIR/heap.<pid>.<connection>.final.pb.gz when the connection
//     ends, whatever the reason; the pid is the kernel's (SO_PEERCRED), the
//     connection number counts from 1 per collector run. Each file's pprof
//     comments say whether it is final and why, and how many records the VM
//     dropped. Files are written whole (temporary file and rename).
// .end  End of a connection: on end-of-file the ring is drained to the end
//     with the writer known to be gone (torn records skipped and counted),
//     then the final profile is written. With the end byte first, the VM
//     exited; without it, it died.
#ifndef MINIVM_EXAMPLES_COLLECTOR_COLLECTOR_H_
#define MINIVM_EXAMPLES_COLLECTOR_COLLECTOR_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ring_buffer.h"
#include "session.h"

namespace collector {

struct CollectorOptions {
  std::string socket_path;
  std::string out_dir;
  double period_seconds = 0;  // 0: no periodic dumps
  uint64_t ring_bytes = kDefaultRingBytes;
  int64_t max_clients = 64;
};

class Collector {
 public:
  static constexpr int kTickMs = 50;
  static constexpr int kDrainBudget = 4096;
  static constexpr int kHandshakeSeconds = 10;

  explicit Collector(CollectorOptions options);
  ~Collector();

  // Binds and listens (replacing a stale socket file, refusing a live one)
  // and sets up signal handling. SIGTERM, SIGINT and SIGUSR1 must be blocked
  // in every thread before (BlockSignals). False with a one-line *error.
  bool Start(std::string* error);
  // Serves until SIGTERM or SIGINT, then writes the final profiles of the
  // connected VMs. Returns the process exit code.
  int Run();

  // Blocks the signals the loop takes through its signalfd, and SIGPIPE.
  static void BlockSignals();

 private:
  struct Client {
    int fd = -1;
    uint32_t connection = 0;
    pid_t pid = 0;
    bool active = false;      // handshake done
    int64_t deadline_ns = 0;  // of the handshake
    std::string refuse;       // refuse at hello time (too many clients)
    std::unique_ptr<SharedRing> ring;
    std::unique_ptr<RingReader> reader;
    std::unique_ptr<Session> session;
    bool got_end = false;
    bool eof = false;
    bool more = false;  // records left after a pass
    std::string error;  // malformed data: the connection ends
    int dumps = 0;
    // What the last dump showed, so that periodic dumps skip a VM that has
    // sent and dropped nothing since.
    uint64_t records_at_last_dump = UINT64_MAX;
    uint64_t dropped_at_last_dump = UINT64_MAX;
  };

  void Accept();
  void HandleHello(Client* c);
  void Refuse(Client* c, const std::string& reason);
  void ReadSocket(Client* c);
  // Reads up to `budget` records (budget < 0: what the ring holds now).
  void Drain(Client* c, int64_t budget, bool writer_gone);
  void Dump(Client* c, const std::string& why, bool final);
  void Finish(Client* c, const std::string& why);
  void CloseClient(Client* c);
  void HandleSignals(bool* stop, std::string* stop_reason);

  CollectorOptions options_;
  int listen_fd_ = -1;
  int signal_fd_ = -1;
  bool bound_ = false;
  uint32_t next_connection_ = 1;
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace collector

#endif  // MINIVM_EXAMPLES_COLLECTOR_COLLECTOR_H_
