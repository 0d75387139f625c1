#pragma once
// Whether the server at HOST:PORT speaks ringrpc at all: asked on a connection of its own when
// ringrpc-call's first call fails or is slow to answer, so that pointing it at an HTTP, Redis or
// TLS port says so instead of "protocol_error" or a timeout.

#include <chrono>
#include <cstdint>
#include <string>

namespace ringrpc::tools {

struct peer_probe {
  bool connected = false;  ///< the probe's own connection was accepted
  bool closed = false;     ///< the peer closed it without sending a byte
  std::string sniffed;     ///< what the first bytes look like (peer_sniff.hpp): "ringrpc" for a Pong
  std::string front;       ///< the first bytes, escaped (escape_bytes)
  std::string asked;       ///< what they answered: "a ringrpc Ping" or "\"PING\""
};

/// Connects to host:port in plaintext and sends a ringrpc Ping, which a ringrpc server answers
/// at once (a Pong, even while its handlers are busy). A text protocol waits for a line end
/// instead: if nothing came back within half of `budget`, a second connection sends
/// "PING\r\n\r\n", which Redis answers with +PONG and HTTP servers with a 400. Only what
/// comes back within `budget` in all is looked at.
peer_probe probe_peer(const std::string& host, std::uint16_t port, std::chrono::milliseconds budget);

}  // namespace ringrpc::tools
