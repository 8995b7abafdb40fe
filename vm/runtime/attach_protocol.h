// The attach protocol shared by the VM's attach listener
// (vm/runtime/attach_listener.h) and the `minivm-attach` client
// (vm/attach/minivm_attach.cc). docs/attach.md is its reference.
//
// Files: one private folder per user, `/tmp/minivm-attach-<uid>` (mode 0700,
// owned by that user), holding `<pid>.sock` (the VM's listening socket, mode
// 0600) and `<pid>.trigger` (made by the client before it sends SIGQUIT; the
// VM starts listening only when the file is there). The folder does not
// follow $TMPDIR on purpose: the client and the VM must agree on it without
// sharing an environment.
//
// Framing, one request and one reply per connection, integers little-endian:
//   request: "MVA1" u32 length, then `length` bytes (at most kMaxRequestBytes):
//            COMMAND, or COMMAND '\0' ARGUMENT; no other NUL byte.
//   reply:   "MVA1" u32 status (0 = done, 1 = refused or failed)
//            u32 length, then `length` bytes of text (at most kMaxReplyBytes);
//            for `load`, a kStatusLoading frame of length 0 may come first.
#ifndef MINIVM_VM_RUNTIME_ATTACH_PROTOCOL_H_
#define MINIVM_VM_RUNTIME_ATTACH_PROTOCOL_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace minivm::attach {

inline constexpr char kMagic[4] = {'M', 'V', 'A', '1'};
inline constexpr size_t kMaxRequestBytes = 16 * 1024;
inline constexpr size_t kMaxReplyBytes = 16 * 1024 * 1024;
inline constexpr uint32_t kStatusOk = 0;
inline constexpr uint32_t kStatusError = 1;
// A frame of no text the VM sends when it starts loading the agent of a
// `load` request (dlopen, then Agent_OnAttach); the reply proper follows
// when Agent_OnAttach returns. A client that runs out of time after this
// frame knows that the agent is still starting, not that the VM never took
// the request.
inline constexpr uint32_t kStatusLoading = 2;

// The name of the VM's signal dispatcher thread (/proc/PID/task/TID/comm,
// at most 15 characters): the mark of a process that takes SIGQUIT as an
// attach request. The client signals only a process that has a thread of
// this name and blocks SIGQUIT in every other thread (docs/attach.md,
// "Threat model").
inline constexpr char kMarkerThreadName[] = "minivm-signals";

// The commands the VM knows; anything else is refused.
inline constexpr std::string_view kCommands[] = {"load", "threads", "heap", "gc", "agents"};
// True for a command that needs an argument (load).
bool CommandTakesArgument(std::string_view command);
// True for a command that may have an argument: load, and heap (an optional
// class histogram, below); the others take none.
bool CommandMayTakeArgument(std::string_view command);
bool IsKnownCommand(std::string_view command);

// `heap`'s optional argument, the class histogram (jmap -histo:live):
// `histo` (the kDefaultHistogramRows largest classes by bytes), `histo=N`
// (N >= 1) or `histo=all` (*rows = 0). False with a one-line *error for
// anything else; the client checks it before connecting (bad usage, exit 2)
// and the VM again (a request from another client).
inline constexpr uint64_t kDefaultHistogramRows = 20;
bool ParseHistogramArgument(std::string_view argument, uint64_t* rows, std::string* error);

// The private folder of user `uid`, and the files of process `pid` in it.
std::string AttachDirectory(uid_t uid);
std::string SocketPath(uid_t uid, pid_t pid);
std::string TriggerPath(uid_t uid, pid_t pid);

// Whether a peer with user id `peer` may talk to a VM run by `self`: the
// same user, or root.
inline bool PeerAllowed(uid_t peer, uid_t self) { return peer == self || peer == 0; }

// Encodes a request or a reply frame.
std::string EncodeRequest(std::string_view command, std::string_view argument, bool has_argument);
std::string EncodeReply(uint32_t status, std::string_view text);

// A parsed request payload: false with *error set for anything malformed.
bool ParseRequestPayload(std::string_view payload, std::string* command, std::string* argument,
                         bool* has_argument, std::string* error);

// Whether process `pid` has ended: no such process, or a zombie (a VM that
// called _exit and was not yet reaped by its parent).
bool ProcessEnded(pid_t pid);
// Whether process `pid` takes SIGQUIT as an attach request: a thread named
// kMarkerThreadName (the signal dispatcher, which sigwaits for SIGQUIT and
// so shows it unblocked while it waits), and SIGQUIT blocked in every other
// thread, so that no thread would take the signal's default action (the
// process ends). False with the reason in *why (a phrase: "it has no
// thread named ..."). *marked, if given, says whether the marker thread
// was found.
bool IsAttachableVm(pid_t pid, std::string* why, bool* marked = nullptr);

// Text from the VM or an agent made safe for a terminal: every control
// character but newline and tab, DEL, C1 controls and bytes that are not
// UTF-8 become `\xHH`, so that the text cannot move the cursor, change
// colours or rewrite earlier lines. Newlines stay: they separate lines.
std::string EscapeForTerminal(std::string_view text);
// One field inside a line (a thread's name, a library path): as above, and
// newline, tab, carriage return, `\` and `"` become `\n`, `\t`, `\r`, `\\`
// and `\"`, so that the field can neither end its line (and forge the next
// one) nor its quotes.
std::string EscapeField(std::string_view text);

void PutU32(std::string* out, uint32_t v);
uint32_t GetU32(const unsigned char* p);

// Socket I/O with a deadline, for both ends: neither may hang on a silent or
// slow peer. The socket may be blocking; each call polls, then sends or
// receives with MSG_DONTWAIT, and sends never raise SIGPIPE.
using Clock = std::chrono::steady_clock;
enum class IoResult {
  kDone,      // everything read or sent
  kClosed,    // end of file or an error before that
  kTimedOut,  // the deadline passed first
};
// Waits until `fd` is ready for `events` (poll's); false at the deadline or
// on an error.
bool WaitFor(int fd, short events, Clock::time_point deadline);
IoResult ReadExactly(int fd, char* buf, size_t size, Clock::time_point deadline);
IoResult SendAll(int fd, std::string_view data, Clock::time_point deadline);

}  // namespace minivm::attach

#endif  // MINIVM_VM_RUNTIME_ATTACH_PROTOCOL_H_
