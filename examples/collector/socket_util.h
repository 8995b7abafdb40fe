// SOCK_SEQPACKET Unix-socket helpers shared by the collector and the remote
// agent: one message per call, optionally with one file descriptor
// (SCM_RIGHTS). No call raises SIGPIPE (MSG_NOSIGNAL): a peer that is gone is
// an EPIPE return, which is how the agent notices a dead collector.
#ifndef MINIVM_EXAMPLES_COLLECTOR_SOCKET_UTIL_H_
#define MINIVM_EXAMPLES_COLLECTOR_SOCKET_UTIL_H_

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace collector {

// Fills a sockaddr_un for `path`; false (with *error) if it does not fit.
bool UnixAddress(const std::string& path, void* sockaddr_un_out, std::string* error);

// Sends one message, with `fd` attached if fd >= 0. flags: e.g. MSG_DONTWAIT.
// Returns what send() returns (-1 with errno on failure); retries EINTR.
ssize_t SendMessage(int sock, const void* buf, size_t len, int fd, int flags);

// Receives one message into buf. *fd receives an attached descriptor (made
// close-on-exec) or -1; any further descriptors are closed. *truncated is
// set if the message or its ancillary data did not fit. Returns what recv()
// returns (0 at end of file); retries EINTR.
ssize_t RecvMessage(int sock, void* buf, size_t len, int flags, int* fd, bool* truncated);

// Send and receive time-outs for a blocking socket (the handshake).
bool SetSocketTimeouts(int sock, int seconds);

}  // namespace collector

#endif  // MINIVM_EXAMPLES_COLLECTOR_SOCKET_UTIL_H_
