#pragma once
// The admin server's poll loop (admin_server.hpp): its connections, what it does when a socket
// is readable or writable, accepting within the connection slots, and the timeouts. One object
// per run(), living on the admin thread; nothing here is shared with another thread but the
// server's counters.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <poll.h>

#include "base/peer_address.hpp"
#include "ops/admin_server.hpp"

namespace ringrpc::detail {

class admin_loop {
 public:
  explicit admin_loop(admin_server& server);
  /// Serves until stop() writes the server's eventfd.
  void run();

 private:
  using clock_type = std::chrono::steady_clock;

  struct connection {
    enum class phase { reading, writing, lingering };
    int fd = -1;
    std::unique_ptr<record_session> tls;  // HTTPS: every byte in and out goes through it
    bool peer_closed = false;             // TLS: the client's close_notify has arrived
    bool probe_only = false;  // beyond max_connections: probe routes only, short read timeout
    clock_type::time_point accepted;
    peer_address peer;  // for the failed-token budget
    phase state = phase::reading;
    std::string in;   // the request as received (plaintext)
    std::string out;  // bytes for the socket: the response, or (TLS) handshake records too
    std::size_t written = 0;
    std::size_t discarded = 0;
    clock_type::time_point deadline;
  };

  // One turn: poll, serve the ready connections, expire the late ones, accept.
  int poll_timeout_ms(clock_type::time_point now, bool accepting) const;
  void serve_ready();
  void expire_late();
  void accept_pending();
  bool admit(connection& c);
  void evict_oldest_probe();

  // The request: read it, route it, answer it.
  void read_some(connection& c);
  void take(connection& c, const char* data, std::size_t n);
  bool unseal(connection& c, const char* data, std::size_t n);
  void examine(connection& c);
  bool refused_by_auth(connection& c, const http_request& req, bool head, bool probe);
  http_response run_page(const admin_server::handler& h, const http_request& req);
  void respond(connection& c, const http_response& r, bool head_only, bool allow_header);
  void write_some(connection& c);

  // Endings.
  void end_now(connection& c);
  void end_with_close_notify(connection& c);
  void turn_away(int& fd);
  void tls_failed(const std::string& why);

  admin_server& _server;
  const admin_server_options& _options;
  std::vector<connection> _conns;
  std::vector<pollfd> _fds;  // the stop eventfd, the listener, then _conns in order
  std::vector<std::byte> _tls_plain;
  std::vector<std::byte> _tls_out;
  clock_type::time_point _last_tls_warning{};
  clock_type::time_point _accept_paused_until{};
  std::chrono::milliseconds _backoff;
  const std::string _busy;  // the 503 a refused connection gets, made once
};

}  // namespace ringrpc::detail
