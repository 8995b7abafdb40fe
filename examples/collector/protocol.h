// The wire protocol between the remote agent (libremote.so, inside a VM) and
// minivm-collector: the handshake messages on the Unix socket and the record
// formats in the shared-memory ring buffer (ring_buffer.h). docs/collector.md
// is the prose version; this header is the normative one. Both sides run on
// the same machine, so integers are native-endian and structs have no
// padding (static_asserts below); a version bump is the only way to change a
// layout.
//
// Connection, in order:
// .connect  The agent connects to the collector's SOCK_SEQPACKET socket (message
//     boundaries are kept, so every message below is one recv) and sends a
//     Hello.
// .welcome  The collector answers with a Welcome. If it accepts, the Welcome
//     carries the ring buffer's memfd as SCM_RIGHTS ancillary data; if not,
//     `status` is non-zero and `reason` says why, and it closes the socket.
// .records  From then on the agent writes records into the ring buffer and sends
//     one-byte messages: kWakeByte when the collector asked to be woken
//     (Meta::reader_idle), kEndByte once, at VM death, just before closing.
//     The collector sends nothing more; it closes the socket when it stops
//     serving the VM (shutdown, or a malformed record), which the agent sees
//     as end-of-file.
//  A VM that closes the socket without kEndByte died (crash, kill -9).
#ifndef MINIVM_EXAMPLES_COLLECTOR_PROTOCOL_H_
#define MINIVM_EXAMPLES_COLLECTOR_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace collector {

constexpr uint32_t kMagic = 0x4352564d;  // "MVRC" in memory on little-endian
constexpr uint32_t kVersion = 1;

constexpr char kWakeByte = 'W';
constexpr char kEndByte = 'E';

// Ring sizes: a power of two, a whole number of pages (the data area is
// mapped twice back to back), and bounded so that a client cannot make the
// collector reserve absurd amounts of address space.
constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kMinRingBytes = 4096;
constexpr uint64_t kMaxRingBytes = uint64_t{256} << 20;
constexpr uint64_t kDefaultRingBytes = uint64_t{4} << 20;

inline bool ValidRingBytes(uint64_t n) {
  return n >= kMinRingBytes && n <= kMaxRingBytes && (n & (n - 1)) == 0;
}

// Limits the collector enforces on every record (a client is untrusted).
constexpr uint32_t kMaxFrames = 4096;
constexpr uint32_t kMaxNameBytes = 4096;

// ---- Handshake (one SOCK_SEQPACKET message each) --------------------------

struct Hello {  // agent -> collector
  uint32_t magic;
  uint32_t version;
  uint32_t pid;         // informational: the collector names files by SO_PEERCRED's pid
  uint32_t reserved;    // 0
  int64_t interval;     // the sampling interval in force at connection (bytes)
  uint64_t ring_bytes;  // the data-area size wanted; 0: the collector's default
};

enum WelcomeStatus : uint32_t {
  kAccepted = 0,
  kRefused = 1,  // `reason` says why
};

struct Welcome {  // collector -> agent; with the memfd iff status == kAccepted
  uint32_t magic;
  uint32_t version;
  uint32_t status;      // WelcomeStatus
  uint32_t connection;  // the collector's connection number (1, 2, ...)
  uint64_t ring_bytes;  // the data-area size of the ring it hands over
  char reason[112];     // NUL-terminated, when refused
};

static_assert(sizeof(Hello) == 32 && std::is_trivially_copyable_v<Hello>);
static_assert(sizeof(Welcome) == 136 && std::is_trivially_copyable_v<Welcome>);

// ---- Records in the ring buffer -------------------------------------------
//
// Every record starts with an 8-byte header, one std::atomic<uint64_t>:
//
//    63  62           48 47          32 31                       0
//   +---+---------------+--------------+--------------------------+
//   | C |   0 (unused)  |     type     |   size (bytes, with the  |
//   |   |               |  RecordType  |   header; a multiple of 8)|
//   +---+---------------+--------------+--------------------------+
//
// C (committed) is set, with release ordering, after the payload is written.
// A header of 0 means nothing has been written there yet; size without C
// means reserved and being written (or torn, if the writer died).
// The payload follows the header; `size` includes up to 7 bytes of padding
// after variable-length payloads.

constexpr uint64_t kCommitBit = uint64_t{1} << 63;
constexpr uint64_t kHeaderBytes = 8;

inline uint64_t MakeHeader(uint16_t type, uint32_t size) {
  return static_cast<uint64_t>(type) << 32 | size;
}
inline uint32_t HeaderSize(uint64_t h) { return static_cast<uint32_t>(h); }
inline uint16_t HeaderType(uint64_t h) { return static_cast<uint16_t>(h >> 32); }
inline bool HeaderCommitted(uint64_t h) { return (h & kCommitBit) != 0; }
inline bool HeaderReservedBitsClear(uint64_t h) { return (h & 0x7fff000000000000ull) == 0; }

inline constexpr uint64_t AlignUp8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

enum RecordType : uint16_t {
  kAlloc = 1,    // a sampled allocation: AllocRecord + frame_count x FrameRecord
  kFree = 2,     // TagRecord: the object of that tag died
  kPromote = 3,  // TagRecord: the object of that tag moved to the old generation
  kMethod = 4,   // MethodRecord + name + file: a method's names, sent once
  kLine = 5,     // LineRecord: the line of one (method, location), sent once
  kClass = 6,    // ClassRecord + name, sent once per class
  kThread = 7,   // ThreadRecord + name, sent once per thread
};
constexpr uint16_t kMaxRecordType = kThread;

// Ids: `method` and `klass` are the VM's vmtiMethodID / vmtiClass handle
// values (valid for the VM's lifetime, so unique); `thread` is the agent's
// own number for an OS thread; `tag` is the agent's tag of the sampled
// object (0: untagged, no free or promote will follow).
struct AllocRecord {
  uint64_t tag;
  uint64_t size;  // object bytes
  double weight;  // Horvitz-Thompson bytes this sample stands for
  uint64_t klass;
  uint32_t thread;
  uint32_t frame_count;  // FrameRecords follow, innermost first
};
struct FrameRecord {
  uint64_t method;
  int64_t location;
};
struct TagRecord {
  uint64_t tag;
};
struct MethodRecord {
  uint64_t method;
  uint32_t name_bytes;  // then the name, then the file name, no terminators
  uint32_t file_bytes;
};
struct LineRecord {
  uint64_t method;
  int64_t location;
  int32_t line;  // 0: unknown
  uint32_t reserved;
};
struct ClassRecord {
  uint64_t klass;
  uint32_t name_bytes;
  uint32_t reserved;
};
struct ThreadRecord {
  uint32_t thread;
  uint32_t name_bytes;
};

static_assert(sizeof(AllocRecord) == 40 && sizeof(FrameRecord) == 16);
static_assert(sizeof(TagRecord) == 8 && sizeof(MethodRecord) == 16);
static_assert(sizeof(LineRecord) == 24 && sizeof(ClassRecord) == 16);
static_assert(sizeof(ThreadRecord) == 8);

// The largest record the collector accepts (an alloc with kMaxFrames).
constexpr uint64_t kMaxRecordBytes =
    kHeaderBytes + sizeof(AllocRecord) + kMaxFrames * sizeof(FrameRecord);

}  // namespace collector

#endif  // MINIVM_EXAMPLES_COLLECTOR_PROTOCOL_H_
