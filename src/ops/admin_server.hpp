#pragma once
// A small HTTP/1.1 server for the status pages (/metrics, /healthz, /status, ...): one thread,
// non-blocking sockets and poll(2). It is off the RPC path: it shares nothing with the rings and
// only calls the page callbacks it was given, on its own thread. One request per connection
// (Connection: close), GET and HEAD only, bounded request size and time, so a slow or hostile
// client costs one slot for at most the read timeout and never holds up the other clients;
// health probes are answered even while every slot is taken.
//
// Optionally over TLS: the poll loop feeds the ciphertext it receives to a record_session (the
// seam of ringrpc/record_layer.hpp, so this library links no TLS library) and sends what comes
// out. And optionally behind bearer tokens, health probes excepted.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "ops/http_request.hpp"
#include "ringrpc/record_layer.hpp"
#include "ringrpc/server.hpp"
#include "auth/auth_limiter.hpp"

namespace ringrpc::detail {

struct http_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string www_authenticate;  ///< the WWW-Authenticate header's value (with 401); "" = none
  std::uint32_t retry_after_s = 0;  ///< a Retry-After header (with 429); 0 = none
};

struct admin_server_options {
  std::string host = "127.0.0.1";  ///< address or name to bind; loopback by default
  std::uint16_t port = 0;          ///< 0 picks a free port; see admin_server::port()
  std::size_t max_request_bytes = 8 * 1024;  ///< request line + headers; more gets 431
  /// Time from accept until the request head is complete; then 408 and close.
  std::chrono::milliseconds read_timeout{2000};
  /// Time to write a response to a client that does not read; then the connection is dropped.
  std::chrono::milliseconds write_timeout{10'000};
  unsigned max_connections = 32;  ///< connections for any page at once
  /// Beyond max_connections, this many more may wait, each for at most probe_read_timeout,
  /// and are served only probe routes (/healthz, /readyz); other pages get 503. When these are
  /// taken too, the oldest of them is answered 503 and closed to make room: the newest
  /// connection always gets its chance, so clients that connect and say nothing cannot make a
  /// health check fail.
  unsigned probe_connections = 32;
  std::chrono::milliseconds probe_read_timeout{250};
  /// accept() failing for want of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM) pauses accepting
  /// this long, doubling up to max_accept_backoff while it goes on, instead of spinning on a
  /// listener that stays readable.
  std::chrono::milliseconds accept_backoff{10};
  std::chrono::milliseconds max_accept_backoff{200};
  /// Serve HTTPS: every connection gets a session of this record layer (the RPC listener's, so
  /// the same certificate and the same reload). The handshake counts against read_timeout (or
  /// probe_read_timeout). Null: plaintext HTTP.
  std::shared_ptr<record_layer> tls;
  /// When set, every route but the probes needs `Authorization: Bearer <t>` with
  /// accept_token(t) true; else 401 with `WWW-Authenticate: Bearer`. Runs on the admin thread
  /// and should compare in constant time; `t` is a secret (never log it).
  std::function<bool(std::string_view token)> accept_token;
  /// Tokens presented and not accepted, per source address (as the RPC port's; one request per
  /// connection here, so per_connection does not apply). Past the budget, requests carrying a
  /// token get 429 with Retry-After, unchecked.
  auth_failure_limits auth_failures;
};

/// How a route is served when every connection slot is taken.
enum class route_kind {
  page,   ///< only in one of max_connections slots
  probe,  ///< also beyond them (cheap answers such as /healthz and /readyz)
};

class admin_server {
 public:
  /// Page callbacks run on the admin thread, one at a time. An exception becomes a 500 reply
  /// carrying what(). They must be quick: they hold up other admin requests, nothing else.
  using handler = std::function<http_response(const http_request&)>;

  explicit admin_server(admin_server_options options = {});
  ~admin_server();  ///< stop()s
  admin_server(const admin_server&) = delete;
  admin_server& operator=(const admin_server&) = delete;

  /// Serves GET (and HEAD) of exactly `path` ("/metrics"). Before start() only; a second
  /// route for a path replaces the first. Throws std::logic_error after start().
  void route(std::string path, handler h, route_kind kind = route_kind::page);
  void route(std::string path, std::function<http_response()> h, route_kind kind = route_kind::page);

  /// Times accept() failed for want of resources (EMFILE and the like), for tests and reports.
  std::uint64_t accept_failures() const noexcept { return _accept_failures.load(std::memory_order_relaxed); }
  /// TLS connections that ended before a request could be read: failed or unfinished
  /// handshakes, plaintext sent to the TLS port. Each is closed; a warning is logged at most
  /// once a second.
  std::uint64_t tls_failures() const noexcept { return _tls_failures.load(std::memory_order_relaxed); }
  /// Requests answered 401 (no token, or one not accepted).
  std::uint64_t unauthorized() const noexcept { return _unauthorized.load(std::memory_order_relaxed); }
  /// Requests answered 429 unchecked: their address had used up auth_failures.burst.
  std::uint64_t auth_limited() const noexcept { return _auth_limited.load(std::memory_order_relaxed); }

  /// Binds, listens and starts the thread. Throws std::system_error naming host:port when the
  /// address cannot be bound.
  void start();
  /// Closes the listener and every connection (answered or not) and joins. Idempotent.
  void stop();

  /// The bound port (the picked one with port 0). Valid after start().
  std::uint16_t port() const noexcept { return _port; }
  /// "127.0.0.1:9464", for the start-up log line.
  std::string address() const;

 private:
  friend class admin_loop;
  void run();

  admin_server_options _options;
  struct route_entry {
    handler h;
    route_kind kind = route_kind::page;
  };
  std::map<std::string, route_entry, std::less<>> _routes;
  std::atomic<std::uint64_t> _accept_failures{0};
  std::atomic<std::uint64_t> _tls_failures{0};
  std::atomic<std::uint64_t> _unauthorized{0};
  std::atomic<std::uint64_t> _auth_limited{0};
  std::unique_ptr<auth_limiter> _limiter;  // with accept_token only
  int _listen_fd = -1;
  int _stop_fd = -1;  // eventfd: stop() writes it to end the poll
  std::uint16_t _port = 0;
  bool _started = false;
  std::thread _thread;
};

}  // namespace ringrpc::detail
