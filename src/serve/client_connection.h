// The socket of the connection a request came on, so that a handler can tell whether its client is
// still there while it waits for a long answer. cpp-httplib 0.11 gives a handler the connection's
// addresses but not its socket, and notices a client that left only when a write fails (for a
// non-streamed answer, at its first keep-alive, a second or more after the client left); the
// socket is found by its addresses instead, once per request.
#pragma once

#include <string>

namespace grove::serve {

struct ConnectionAddresses {
  std::string local_addr;  // numeric, as getnameinfo(NI_NUMERICHOST) writes it (cpp-httplib too)
  int local_port = -1;
  std::string remote_addr;
  int remote_port = -1;
};

class ClientConnection {
 public:
  // The connected socket of this process whose local and peer addresses are `addresses`; none
  // (Closed() always false) when no socket matches, so a failed lookup changes nothing.
  explicit ClientConnection(const ConnectionAddresses& addresses);

  bool found() const { return fd_ >= 0; }
  // True once the client has closed its side or reset the connection: whatever it asked for can
  // no longer reach it. Never blocks; data the client sent ahead (a pipelined request) is not read.
  bool Closed() const;

 private:
  int fd_ = -1;
};

}  // namespace grove::serve
