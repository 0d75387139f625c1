#pragma once
// A small HTTP/1.1 server for the status pages (/metrics, /healthz, /status, ...): one thread,
// non-blocking sockets and poll(2). It is off the RPC path: it shares nothing with the rings and
// only calls the page callbacks it was given, on its own thread. One request per connection
// (Connection: close), GET and HEAD only, bounded request size and time, so a slow or hostile
// client costs one slot for at most the read timeout and never holds up the other clients.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

namespace ringrpc::detail {

struct http_request {
  std::string method;  ///< "GET" or "HEAD"
  std::string path;    ///< without the query, e.g. "/metrics"
  std::string query;   ///< after '?', undecoded; empty when none
};

struct http_response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct admin_server_options {
  std::string host = "127.0.0.1";  ///< address or name to bind; loopback by default
  std::uint16_t port = 0;          ///< 0 picks a free port; see admin_server::port()
  std::size_t max_request_bytes = 8 * 1024;  ///< request line + headers; more gets 431
  /// Time from accept until the request head is complete; then 408 and close.
  std::chrono::milliseconds read_timeout{2000};
  /// Time to write a response to a client that does not read; then the connection is dropped.
  std::chrono::milliseconds write_timeout{10'000};
  unsigned max_connections = 32;  ///< beyond this, new connections get 503 and are closed
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
  void route(std::string path, handler h);
  void route(std::string path, std::function<http_response()> h);

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
  void run();

  admin_server_options _options;
  std::map<std::string, handler, std::less<>> _routes;
  int _listen_fd = -1;
  int _stop_fd = -1;  // eventfd: stop() writes it to end the poll
  std::uint16_t _port = 0;
  bool _started = false;
  std::thread _thread;
};

}  // namespace ringrpc::detail
