// The shared-memory ring buffer between the remote agent (many writer
// threads, inside a VM) and minivm-collector (one reader). After Perfetto's
// heapprofd SharedRingBuffer; docs/collector.md has the pictures.
//
// Design:
// .mapping  Backing and mapping. A memfd holds one metadata page (Meta) and a data
//     area of `ring_bytes`, a power of two and a whole number of pages. Each
//     side maps it as [META][DATA][DATA again]: the data area twice, back to
//     back, so a record that runs past the end of the area is still
//     contiguous and neither side handles wrap-around. The collector creates
//     the memfd and seals its size (F_SEAL_SHRINK/GROW, and F_SEAL_SEAL so
//     that nobody can lift them), so a client cannot truncate it under the
//     collector's mapping (which would be SIGBUS). The agent checks those
//     seals in Attach for the same reason the other way round: a ring from
//     something that is not a real collector is refused, not mapped.
// .positions  Positions. Meta::write_pos and Meta::read_pos are byte counters that
//     only grow (64 bits: no wrap in practice); a position p is at offset
//     p & (ring_bytes - 1). write_pos - read_pos is the bytes in use and
//     never exceeds ring_bytes.
// .writers  Several writers, no lock. A writer reserves [w, w + size) by a CAS on
//     write_pos, after checking against read_pos (acquire) that the space is
//     free (read_pos loaded first, then write_pos, each attempt: see
//     RingWriter::Reserve); then it stores the record's header (size and
//     type, not committed), copies the payload, and stores the header again
//     with the commit bit (release). Between reserve and commit it calls
//     nothing that can block or wait for the VM (the agent builds everything
//     first), so a record is committed microseconds after it is reserved. A
//     full buffer is never waited for: the record is dropped and counted in
//     Meta.
//     Rejected alternative: heapprofd's spinlock around the reservation,
//     which can make an allocating thread wait for a descheduled one.
// .reader  One reader. It reads the header at read_pos (acquire): 0 or no commit
//     bit means "not yet" (records are consumed in reservation order, so a
//     slow writer delays the records after it, never corrupts them). A
//     committed record is copied out of shared memory (so that a client
//     scribbling on the buffer cannot change it while it is parsed), its
//     bytes are zeroed, and read_pos is advanced (release). Zeroing is what
//     makes a header read as 0 until a writer stores it: a writer's CAS
//     moves write_pos before its header store, and the reader must not
//     mistake an old record's header for a new one.
// .trust  Trust. The reader keeps its own copy of read_pos and validates every
//     header (size a multiple of 8, at least 8, within what write_pos says
//     was reserved, at most kMaxRecordBytes, reserved bits clear) and
//     write_pos (at most ring_bytes ahead); anything else is kCorrupt. The
//     writer keeps the reserved range inside the double mapping whatever
//     Meta says, so a collector cannot make it write out of bounds either.
// .wake-ups  Wake-ups (heapprofd's reader_paused). The reader drains on a timer
//     (the collector's tick) and, when it has caught up, sets
//     Meta::reader_idle and sleeps unless the buffer already holds
//     WakeThreshold bytes (an eighth of it). A writer that commits while
//     reader_idle is set and the buffer holds at least that much clears the
//     flag (exchange: one writer wins) and sends one kWakeByte. So an
//     allocating thread makes a system call only when the collector is
//     asleep and the buffer is filling, never per record, and the collector
//     does not spin on a trickle of records either. The handshake is four
//     seq_cst operations (not fences, which TSan cannot check): the writer's
//     reserving CAS on write_pos then its load of reader_idle, the reader's
//     store of reader_idle then its load of write_pos. In their single total
//     order either the reader sees the reservation and stays up, or the
//     writer sees the flag. (If the reservation is seen but its record is
//     not yet committed, the reader sleeps rather than spin; the wake-up can
//     then be late by at most one tick.)
// .death  Death. A writer that dies between reserve and commit leaves a header
//     with a size and no commit bit (a torn record), or, in the instant
//     between its CAS and its first header store, a zero header. Once the
//     writer's process is gone the reader skips torn records and counts
//     them; behind a zero header the rest is unreadable, and its bytes are
//     counted. The reader never needs the writer's cooperation.
//
// Atomics on shared memory: std::atomic<uint64_t>/<uint32_t> are lock-free
// and so address-free (static_asserts in ring_buffer.cc), which is what makes
// them work between processes that map the same page at different addresses.
#ifndef MINIVM_EXAMPLES_COLLECTOR_RING_BUFFER_H_
#define MINIVM_EXAMPLES_COLLECTOR_RING_BUFFER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "protocol.h"

namespace collector {

// The metadata page. Fields written by one side only, on separate cache
// lines so that writers and the reader do not false-share.
struct Meta {
  // Set by the collector before it hands the memfd over; never changed.
  uint32_t magic;
  uint32_t version;
  uint64_t ring_bytes;

  // Writers: CAS to reserve. Reader: loads.
  alignas(64) std::atomic<uint64_t> write_pos;
  // Reader: release stores after zeroing what it consumed. Writers: acquire
  // loads before reserving. Never trusted by the reader (it keeps a copy).
  alignas(64) std::atomic<uint64_t> read_pos;

  // Reader: sets before sleeping, clears when draining. Writers: exchange
  // to 0 when they send a wake-up byte.
  alignas(64) std::atomic<uint32_t> reader_idle;
  // Collector: set when it stops serving this client on purpose (shutdown,
  // malformed record), before closing the socket.
  std::atomic<uint32_t> shutting_down;

  // Writers: counts of what the buffer had no room for (relaxed adds).
  alignas(64) std::atomic<uint64_t> dropped_records;  // records of any type
  std::atomic<uint64_t> dropped_samples;              // sampled allocations not reported
  std::atomic<uint64_t> dropped_bytes;                // record bytes
};

// The fill level (bytes in use) at which a sleeping reader wants a wake-up.
inline uint64_t WakeThreshold(uint64_t ring_bytes) { return ring_bytes / 8; }

// A mapped ring (either side). Owns the fd and the mapping.
class SharedRing {
 public:
  // Collector side: a new sealed memfd with a zeroed Meta.
  static std::unique_ptr<SharedRing> Create(uint64_t ring_bytes, std::string* error);
  // Agent side: maps a memfd received from the collector (takes the fd,
  // closes it on failure). Checks the file's seals (F_SEAL_SHRINK,
  // F_SEAL_GROW and F_SEAL_SEAL, all three), its size and the Meta header.
  static std::unique_ptr<SharedRing> Attach(int fd, uint64_t ring_bytes, std::string* error);
  ~SharedRing();
  SharedRing(const SharedRing&) = delete;
  SharedRing& operator=(const SharedRing&) = delete;

  Meta* meta() const { return meta_; }
  uint8_t* data() const { return data_; }
  uint64_t ring_bytes() const { return ring_bytes_; }
  int fd() const { return fd_; }

 private:
  SharedRing(int fd, uint8_t* base, uint64_t ring_bytes);
  static uint8_t* Map(int fd, uint64_t ring_bytes, std::string* error);

  int fd_;
  uint8_t* base_;
  uint64_t ring_bytes_;
  Meta* meta_;
  uint8_t* data_;
};

// The writer side; any number of threads may use one RingWriter at once.
class RingWriter {
 public:
  explicit RingWriter(SharedRing* ring);

  struct Slot {
    uint8_t* payload;  // payload_bytes, contiguous
    std::atomic<uint64_t>* header;
    uint64_t header_value;  // size and type, without the commit bit
    uint64_t end;           // position just past the record
  };
  // Reserves a record with room for payload_bytes. False if the buffer has
  // no room (the record is counted as dropped); never waits.
  bool Reserve(RecordType type, uint64_t payload_bytes, Slot* slot);
  // Publishes a reserved record. True if the reader is asleep and asked to
  // be woken: the caller sends one kWakeByte.
  bool Commit(const Slot& slot);
  // Reserve + copy + Commit of a payload in one piece.
  bool Write(RecordType type, const void* payload, uint64_t bytes, bool* wake);
  // A sampled allocation that was not reported because one of its records
  // (its own or a name it needed) had no room.
  void CountDroppedSample();

 private:
  Meta* meta_;
  uint8_t* data_;
  uint64_t ring_bytes_;
  uint64_t wake_threshold_;
};

// The reader side (one thread).
class RingReader {
 public:
  explicit RingReader(SharedRing* ring);

  enum class Status {
    kRecord,   // *type and *payload hold the next record
    kEmpty,    // nothing committed at the read position yet
    kCorrupt,  // the shared state is invalid; *error says how
  };
  // Takes the next committed record. With writer_gone (the client's process
  // has closed its end), torn records are skipped and counted instead of
  // waited for, and a zero header ends the reading (its bytes counted).
  Status Next(bool writer_gone, uint16_t* type, std::vector<uint8_t>* payload, std::string* error);
  // Marks the reader idle. False if the ring already holds WakeThreshold
  // bytes (the flag is cleared again and the caller should keep reading);
  // true: sleep until a wake-up byte or the next tick.
  bool PrepareToSleep();
  // Clears the idle flag (draining: writers need not wake us).
  void MarkBusy();

  uint64_t position() const { return read_pos_; }
  uint64_t torn_records() const { return torn_records_; }
  uint64_t unreadable_bytes() const { return unreadable_bytes_; }

 private:
  void Consume(uint64_t size);

  Meta* meta_;
  uint8_t* data_;
  uint64_t ring_bytes_;
  uint64_t read_pos_;
  uint64_t torn_records_ = 0;
  uint64_t unreadable_bytes_ = 0;
};

}  // namespace collector

#endif  // MINIVM_EXAMPLES_COLLECTOR_RING_BUFFER_H_
