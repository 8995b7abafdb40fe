#include "ring_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <type_traits>

namespace collector {

// Design point "atomics on shared memory": only lock-free atomics are
// address-free, and only their in-memory representation is the value itself.
static_assert(std::atomic<uint64_t>::is_always_lock_free, "64-bit atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "32-bit atomics must be lock-free");
static_assert(sizeof(std::atomic<uint64_t>) == 8 && alignof(std::atomic<uint64_t>) == 8);
static_assert(std::is_standard_layout_v<Meta>);
static_assert(sizeof(Meta) <= kPageBytes, "Meta must fit its page");
// The offsets docs/collector.md and tests/collector/run_collector_tests.py use.
static_assert(offsetof(Meta, ring_bytes) == 8 && offsetof(Meta, write_pos) == 64 &&
              offsetof(Meta, read_pos) == 128 && offsetof(Meta, reader_idle) == 192 &&
              offsetof(Meta, shutting_down) == 196 && offsetof(Meta, dropped_records) == 256 &&
              offsetof(Meta, dropped_samples) == 264 && offsetof(Meta, dropped_bytes) == 272);

namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::atomic<uint64_t>* HeaderAt(uint8_t* data, uint64_t ring_bytes, uint64_t pos) {
  // pos is a multiple of 8 (every record size is), so the header is aligned.
  return reinterpret_cast<std::atomic<uint64_t>*>(data + (pos & (ring_bytes - 1)));
}

}  // namespace

// ---- SharedRing ------------------------------------------------------------

SharedRing::SharedRing(int fd, uint8_t* base, uint64_t ring_bytes)
    : fd_(fd),
      base_(base),
      ring_bytes_(ring_bytes),
      meta_(std::launder(reinterpret_cast<Meta*>(base))),
      data_(base + kPageBytes) {}

SharedRing::~SharedRing() {
  munmap(base_, kPageBytes + 2 * ring_bytes_);
  close(fd_);
}

uint8_t* SharedRing::Map(int fd, uint64_t ring_bytes, std::string* error) {
  // Reserve the whole range first, so that the two views of the data area
  // are adjacent, then map the file over it (MAP_FIXED within our own
  // reservation replaces only what we reserved).
  const uint64_t total = kPageBytes + 2 * ring_bytes;
  void* base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    *error = Errno("mmap (reserve)");
    return nullptr;
  }
  auto* b = static_cast<uint8_t*>(base);
  if (mmap(b, kPageBytes + ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
          MAP_FAILED ||
      mmap(b + kPageBytes + ring_bytes, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
           fd, static_cast<off_t>(kPageBytes)) == MAP_FAILED) {
    *error = Errno("mmap (ring)");
    munmap(base, total);
    return nullptr;
  }
  return b;
}

std::unique_ptr<SharedRing> SharedRing::Create(uint64_t ring_bytes, std::string* error) {
  if (!ValidRingBytes(ring_bytes)) {
    *error = "bad ring size " + std::to_string(ring_bytes);
    return nullptr;
  }
  int fd = memfd_create("minivm-collector-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    *error = Errno("memfd_create");
    return nullptr;
  }
  if (ftruncate(fd, static_cast<off_t>(kPageBytes + ring_bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    *error = Errno("memfd setup");
    close(fd);
    return nullptr;
  }
  uint8_t* base = Map(fd, ring_bytes, error);
  if (base == nullptr) {
    close(fd);
    return nullptr;
  }
  // The memfd is zero-filled: placement-new only starts the objects'
  // lifetimes (and writes the same zeros) before the client ever sees them.
  Meta* m = new (base) Meta();
  m->magic = kMagic;
  m->version = kVersion;
  m->ring_bytes = ring_bytes;
  return std::unique_ptr<SharedRing>(new SharedRing(fd, base, ring_bytes));
}

std::unique_ptr<SharedRing> SharedRing::Attach(int fd, uint64_t ring_bytes, std::string* error) {
  struct stat st;
  // The seals first: once the size cannot change, the size check below
  // stays true for as long as the mapping lives. Without them the other
  // side could shrink the file under our mapping and a write to the ring
  // would be SIGBUS (ring_buffer.h .mapping).
  constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  int seals = 0;
  if (!ValidRingBytes(ring_bytes)) {
    *error = "bad ring size " + std::to_string(ring_bytes);
  } else if ((seals = fcntl(fd, F_GET_SEALS)) < 0 && errno != EINVAL) {
    *error = Errno("fcntl(F_GET_SEALS)");
  } else if (seals < 0 || (seals & kSeals) != kSeals) {
    // EINVAL: a file that cannot be sealed at all (not a memfd).
    *error = "shared memory not sealed against resizing (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_SEAL)";
  } else if (fstat(fd, &st) != 0) {
    *error = Errno("fstat");
  } else if (static_cast<uint64_t>(st.st_size) != kPageBytes + ring_bytes) {
    *error = "shared memory of " + std::to_string(st.st_size) + " bytes, expected " +
             std::to_string(kPageBytes + ring_bytes);
  } else if (uint8_t* base = Map(fd, ring_bytes, error); base != nullptr) {
    auto ring = std::unique_ptr<SharedRing>(new SharedRing(fd, base, ring_bytes));
    if (ring->meta()->magic == kMagic && ring->meta()->version == kVersion &&
        ring->meta()->ring_bytes == ring_bytes) {
      return ring;
    }
    *error = "shared memory without the collector's header";
    return nullptr;  // ~SharedRing closes the fd
  }
  close(fd);
  return nullptr;
}

// ---- RingWriter ------------------------------------------------------------

RingWriter::RingWriter(SharedRing* ring)
    : meta_(ring->meta()),
      data_(ring->data()),
      ring_bytes_(ring->ring_bytes()),
      wake_threshold_(WakeThreshold(ring->ring_bytes())) {}

bool RingWriter::Reserve(RecordType type, uint64_t payload_bytes, Slot* slot) {
  const uint64_t need = AlignUp8(kHeaderBytes + payload_bytes);
  uint64_t w = 0;
  bool fits = need <= ring_bytes_ && need <= kMaxRecordBytes;
  while (fits) {
    // Acquire: the reader zeroed everything below read_pos before storing it
    // (ring_buffer.h .reader); our header and payload stores come after.
    const uint64_t r = meta_->read_pos.load(std::memory_order_acquire);
    // write_pos is read after read_pos, every time round. The reader moved
    // read_pos past records whose reserving CAS on write_pos happens before
    // our acquire load of it, so this load sees at least that write_pos:
    // w >= r. A write_pos read before read_pos (or left by a failed CAS
    // before a later read_pos) may be older than the reader's progress,
    // and w - r would wrap to "more than full" and drop the record.
    w = meta_->write_pos.load(std::memory_order_relaxed);
    const uint64_t used = w - r;
    // used > ring_bytes_ only if the collector wrote nonsense: treat as full.
    if (used > ring_bytes_ || need > ring_bytes_ - used) {
      fits = false;
      break;
    }
    // read_pos only grows, so the check above stays true if write_pos is
    // still w. On failure both are reloaded and the check redone. seq_cst on
    // success: one half of the wake-up handshake (ring_buffer.h .wake-ups; a locked
    // instruction on x86 whatever the order).
    if (meta_->write_pos.compare_exchange_weak(w, w + need, std::memory_order_seq_cst,
                                               std::memory_order_relaxed)) {
      break;
    }
  }
  if (!fits) {
    meta_->dropped_records.fetch_add(1, std::memory_order_relaxed);
    meta_->dropped_bytes.fetch_add(need, std::memory_order_relaxed);
    return false;
  }
  // Offsets stay inside [0, ring) + need <= 2 * ring: the double mapping,
  // whatever the positions in Meta say (ring_buffer.h .trust).
  slot->header = HeaderAt(data_, ring_bytes_, w);
  slot->header_value = MakeHeader(type, static_cast<uint32_t>(need));
  slot->payload = data_ + (w & (ring_bytes_ - 1)) + kHeaderBytes;
  slot->end = w + need;
  // The size goes in at once so that a reader can skip this record if this
  // process dies before committing it (ring_buffer.h .death).
  slot->header->store(slot->header_value, std::memory_order_relaxed);
  return true;
}

bool RingWriter::Commit(const Slot& slot) {
  slot.header->store(slot.header_value | kCommitBit, std::memory_order_release);
  // seq_cst, after the seq_cst CAS that reserved this record: against the
  // reader's seq_cst store of the flag and load of write_pos, either it saw
  // our reservation or we see its flag (ring_buffer.h .wake-ups).
  if (meta_->reader_idle.load(std::memory_order_seq_cst) == 0) return false;
  // The reader may already be past this record (and others after it): then
  // nothing of ours is waiting, and the difference would wrap.
  const uint64_t r = meta_->read_pos.load(std::memory_order_relaxed);
  if (r >= slot.end || slot.end - r < wake_threshold_) return false;  // its timer will do
  return meta_->reader_idle.exchange(0, std::memory_order_acq_rel) != 0;
}

bool RingWriter::Write(RecordType type, const void* payload, uint64_t bytes, bool* wake) {
  Slot slot;
  if (!Reserve(type, bytes, &slot)) return false;
  std::memcpy(slot.payload, payload, bytes);
  if (Commit(slot)) *wake = true;
  return true;
}

void RingWriter::CountDroppedSample() {
  meta_->dropped_samples.fetch_add(1, std::memory_order_relaxed);
}

// ---- RingReader ------------------------------------------------------------

RingReader::RingReader(SharedRing* ring)
    : meta_(ring->meta()), data_(ring->data()), ring_bytes_(ring->ring_bytes()), read_pos_(0) {}

void RingReader::Consume(uint64_t size) {
  // Zero before publishing: a writer that reserves these bytes later must
  // find a zero header until it stores its own (ring_buffer.h .reader).
  std::memset(data_ + (read_pos_ & (ring_bytes_ - 1)), 0, size);
  read_pos_ += size;
  meta_->read_pos.store(read_pos_, std::memory_order_release);
}

RingReader::Status RingReader::Next(bool writer_gone, uint16_t* type, std::vector<uint8_t>* payload,
                                    std::string* error) {
  for (;;) {
    std::atomic<uint64_t>* hp = HeaderAt(data_, ring_bytes_, read_pos_);
    const uint64_t h = hp->load(std::memory_order_acquire);
    // Loaded after the header: a committed header makes its writer's CAS
    // visible, so a valid record always lies below write_pos.
    const uint64_t w = meta_->write_pos.load(std::memory_order_acquire);
    const uint64_t avail = w - read_pos_;
    if (avail > ring_bytes_) {
      *error = "write position " + std::to_string(w) + " is not within the ring ahead of read " +
               "position " + std::to_string(read_pos_);
      return Status::kCorrupt;
    }
    if (avail == 0) return Status::kEmpty;
    if (h == 0) {
      if (!writer_gone) return Status::kEmpty;  // reserved, header not yet stored
      // A writer died between its CAS and its first header store: nothing
      // says where the records after it start.
      unreadable_bytes_ += avail;
      Consume(avail);
      return Status::kEmpty;
    }
    // While the writer lives, an uncommitted header is being written.
    if (!HeaderCommitted(h) && !writer_gone) return Status::kEmpty;
    const uint32_t size = HeaderSize(h);
    if (!HeaderReservedBitsClear(h) || size < kHeaderBytes || size % 8 != 0 || size > avail ||
        size > kMaxRecordBytes) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "bad record header 0x%016llx at position %llu (%llu bytes reserved)",
                    static_cast<unsigned long long>(h), static_cast<unsigned long long>(read_pos_),
                    static_cast<unsigned long long>(avail));
      *error = buf;
      return Status::kCorrupt;
    }
    if (!HeaderCommitted(h)) {  // torn: its writer died mid-record
      torn_records_++;
      Consume(size);
      continue;
    }
    // Copy out first: the client may rewrite shared memory while we parse.
    *type = HeaderType(h);
    const uint8_t* p = data_ + (read_pos_ & (ring_bytes_ - 1)) + kHeaderBytes;
    payload->assign(p, p + (size - kHeaderBytes));
    Consume(size);
    return Status::kRecord;
  }
}

bool RingReader::PrepareToSleep() {
  // seq_cst store, then seq_cst load (ring_buffer.h .wake-ups): either the writers see
  // the flag and wake us at the threshold, or we see that their
  // reservations already reach it.
  meta_->reader_idle.store(1, std::memory_order_seq_cst);
  const uint64_t used = meta_->write_pos.load(std::memory_order_seq_cst) - read_pos_;
  if (used < WakeThreshold(ring_bytes_) || used > ring_bytes_) return true;
  // Stay up only if the head record is readable: one still being written
  // (or abandoned by a hostile client) must not make the collector spin; its
  // writer wakes us when it commits, or the next tick does.
  const uint64_t h = HeaderAt(data_, ring_bytes_, read_pos_)->load(std::memory_order_acquire);
  if (!HeaderCommitted(h)) return true;
  MarkBusy();
  return false;
}

void RingReader::MarkBusy() {
  if (meta_->reader_idle.load(std::memory_order_relaxed) != 0) {
    meta_->reader_idle.store(0, std::memory_order_relaxed);
  }
}

}  // namespace collector
