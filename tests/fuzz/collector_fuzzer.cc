// libFuzzer target: arbitrary bytes as the contents of a client's ring
// buffer, read by the collector's reader (RingReader) and applied by its
// record parser (Session), as minivm-collector does with an untrusted VM's
// shared memory. Nothing may crash, hang or read out of bounds; the reader
// must stop (kEmpty or kCorrupt) within what the ring can hold; a record
// the session rejects must leave it unchanged; and the profile of whatever
// was accepted must encode.
//
// Input layout:
//   byte 0     flags: bit 0 writer gone (torn records skipped), bit 1 build
//              the profile, bit 2 take write_pos from bytes 1..8 (else the
//              data's length rounded to 8, the easy path to valid records)
//   bytes 1..8 write_pos (little-endian), when bit 2 is set
//   the rest   the data area, from offset 0
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ring_buffer.h"
#include "session.h"

namespace {

constexpr uint64_t kRing = 8192;

void Check(bool ok) {
  if (!ok) std::abort();
}

collector::SharedRing* Ring() {
  static collector::SharedRing* ring = [] {
    std::string error;
    auto r = collector::SharedRing::Create(kRing, &error);
    Check(r != nullptr);
    return r.release();
  }();
  return ring;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const uint8_t flags = data[0];
  uint64_t write_pos;
  std::memcpy(&write_pos, data + 1, 8);
  const uint8_t* body = data + 9;
  const size_t body_size = std::min<size_t>(size - 9, kRing);
  if ((flags & 4) == 0) write_pos = body_size & ~size_t{7};

  collector::SharedRing* ring = Ring();
  std::memset(ring->data(), 0, kRing);
  std::memcpy(ring->data(), body, body_size);
  collector::Meta* m = ring->meta();
  m->write_pos.store(write_pos);
  m->read_pos.store(0);
  m->reader_idle.store(0);

  collector::RingReader reader(ring);
  collector::Session session(4096);
  uint16_t type;
  std::vector<uint8_t> payload;
  std::string error;
  // Every record is at least 8 bytes: a ring holds at most kRing / 8.
  for (uint64_t i = 0;; ++i) {
    Check(i <= kRing / 8 + 1);
    auto st = reader.Next((flags & 1) != 0, &type, &payload, &error);
    if (st == collector::RingReader::Status::kCorrupt) {
      Check(!error.empty());
      break;
    }
    if (st == collector::RingReader::Status::kEmpty) break;
    Check(payload.size() + collector::kHeaderBytes <= kRing);
    const collector::SessionStats before = session.stats();
    if (!session.Apply(type, payload.data(), payload.size(), &error)) {
      Check(!error.empty() && error.find('\n') == std::string::npos);
      Check(session.stats().records == before.records && session.stats().samples == before.samples);
      break;  // the collector ends the connection here
    }
  }
  Check(reader.position() <= kRing);
  if ((flags & 2) != 0) Check(!session.BuildProfile({"fuzz"}).empty());
  return 0;
}
