// The attach listener: how `minivm-attach PID COMMAND` reaches a running VM
// (docs/attach.md has the protocol, docs/tools.md the user's side).
//
// Design
// .on-demand  Nothing until asked. No thread, no socket, no file exists, and nothing
//    on the allocation path or in the interpreter loop changes, until a
//    client asks. The client creates `<pid>.trigger` in the user's private
//    folder (vm/runtime/attach_protocol.h) and sends SIGQUIT; the signal
//    dispatcher (vm/runtime/signal_dispatcher.h), which already sigwaits for
//    SIGINT and SIGTERM, takes it too and calls HandleAttachSignal, which
//    starts the listener thread once. Later requests connect directly.
//    SIGQUIT as in HotSpot: SIGUSR2 belongs to heapprof, SIGUSR1 to programs
//    and collectors, and a SIGQUIT without the trigger file still ends the
//    VM (exit 131), now in order, as SIGINT does.
// .who  Who may talk. The folder is 0700 and must be owned by the VM's user
//    (a folder someone else made, or a symlink, is refused: no listener); the
//    socket is 0600; every connection's SO_PEERCRED uid must be the VM's
//    effective uid or root, otherwise it gets an error reply and nothing runs.
//    The client checks the folder and the socket file likewise, and this
//    process's SO_PEERCRED (pid and uid), before it sends anything; it
//    signals only a process with the signal dispatcher's marker thread
//    (docs/attach.md, "Threat model"). What a reply carries from the
//    program or an agent inside a line (a thread's name) is escaped here
//    (attach::EscapeField); the client escapes the rest for the terminal.
// .input  Hostile input. One request per connection, at most
//    attach::kMaxRequestBytes, read within kIoTimeout (2 s) in total; a
//    malformed request gets an error reply. Requests are served one at a
//    time, so a silent client holds the others up by at most kIoTimeout.
// .threads  What runs where. threads, heap and gc run on the listener thread (a
//    native thread, not a language thread) through the heap's safepoint
//    operations; load and agents go to the agent API through AttachAgentHost,
//    which the composition root (vm/main.cc) supplies, so that vm/runtime
//    never includes agent_api/. Requests are refused until the VM has
//    started (VMInit done) and answer "the VM is ending" once it ends.
//    A load first sends an attach::kStatusLoading frame: an Agent_OnAttach
//    may outlast the client's wait, which then says so.
// .cleanup  No stale files. The socket file is removed at every end the process
//    lives through (_exit by the VM or a second signal, exit() through
//    atexit, the default-fatal signals no one else handles); the files of
//    a process killed outright are removed by the next client for that pid
//    or by the next VM of the user that starts listening (a sweep of the
//    folder for pids that ended or carry no marker).
// Rejected: a listener always on (a thread and a socket in every VM, and a
// file per process in /tmp); a socket in $TMPDIR (the client cannot know the
// VM's environment); a thread per connection (a flood of connections would
// make threads; serial service bounds the cost).
#ifndef MINIVM_VM_RUNTIME_ATTACH_LISTENER_H_
#define MINIVM_VM_RUNTIME_ATTACH_LISTENER_H_

#include <string>
#include <string_view>

namespace minivm {

class VM;

// The agent API's part of attach; implemented in agent_api/attach_host.h.
class AttachAgentHost {
 public:
  virtual ~AttachAgentHost() = default;
  // `load SPEC`: SPEC is PATH_OR_NAME[=OPTIONS] (docs/attach.md). True when
  // Agent_OnAttach returned 0; *reply is what the client prints (stdout on
  // success, the one-line error otherwise).
  virtual bool LoadAgent(std::string_view spec, std::string* reply) = 0;
  // `agents`: one line per loaded agent.
  virtual std::string DescribeAgents() = 0;
  // The sampling lines of `heap`: the interval and the environments that
  // sample.
  virtual std::string DescribeSampling() = 0;
  // On the thread that ends the process, just before _exit: what an agent
  // being loaded has in flight for the VM's stderr must get there now.
  virtual void BeforeExit() {}
};

// Records the VM (and the agent side) requests act on. Call once the VM
// exists, before it runs; both must live until the process ends. No thread
// or file is made.
void ConfigureAttach(VM* vm, AttachAgentHost* host);

// On the signal dispatcher's thread, for SIGQUIT. True if it was an attach
// request (a trigger file was there): the listener is started (once) and
// the trigger removed. False: an ordinary SIGQUIT.
bool HandleAttachSignal();

// Called by the VM just before it _exits, before its last words on stderr
// (AttachAgentHost::BeforeExit).
void PrepareAttachForExit();

// Removes the socket file if the listener made one: called just before the
// process _exits (VM::ExitProcessLocked, a second signal), and at exit()
// (atexit). Async-signal-safe.
void RemoveAttachSocket();

}  // namespace minivm

#endif  // MINIVM_VM_RUNTIME_ATTACH_LISTENER_H_
