#pragma once
// What the C++ tests share: whether this is a sanitizer build, call_options with a deadline
// (within), polling until a condition holds (eventually), a gate threads wait at until the test opens it, and, for loopback integration
// tests, server options of a given size, a started server with the built-in methods, and a raw
// socket that speaks frames byte by byte, so tests can send what no well-behaved client would,
// and an HTTP GET (the admin pages). The header's inline parts need no linking; raw_socket and
// http_get are in test_support.cpp.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "wire/frame_codec.hpp"

// An ASan or TSan build (GCC defines __SANITIZE_*; clang answers __has_feature): tests that
// count on time or on many cycles do less there, as the sanitizers are 5-10x slower.
// RINGRPC_TEST_TSAN: ThreadSanitizer alone, the slowest for lock-free stress loops.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define RINGRPC_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define RINGRPC_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define RINGRPC_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGRPC_TEST_TSAN 1
#endif
#endif

namespace ringrpc::test {

#if defined(RINGRPC_TEST_SANITIZED)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif

/// Call options whose deadline is `t` from now: c.call("echo", x, within(5s)).
inline call_options within(std::chrono::microseconds t) {
  call_options o;
  o.timeout = t;
  return o;
}

/// Polls pred() until it holds or `limit` has passed: whether it held. The limit only bounds a
/// failing test; it asserts no speed.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

/// What f.get() does: "returned", or the message of the std::logic_error it throws (as get()
/// on the client runtime's own thread does, rather than wait for a reply only it can read).
template <class Future>
std::string outcome_of_get(Future& f) {
  try {
    f.get();
    return "returned";
  } catch (const std::logic_error& e) {
    return e.what();
  }
}

/// Server options with `readers` reader rings and `handlers` threads in the default pool, the
/// rest as the defaults; tests set what they are about on the result.
inline server_options threads(unsigned readers, unsigned handlers) {
  server_options o;
  o.readers = readers;
  o.handlers = handlers;
  return o;
}

/// Adds the built-in methods (echo, ...) to `s` and starts it.
inline void start_with_builtins(server& s) {
  add_builtin_methods(s);
  s.start();
}

/// A started server on an ephemeral loopback port with the built-in methods.
inline std::unique_ptr<server> builtin_server(const server_options& o) {
  auto s = std::make_unique<server>(o);
  start_with_builtins(*s);
  return s;
}

/// Threads block in wait() until the test calls open(); the test can first wait until a
/// number of them have arrived. Open it before anything that joins the waiters is destroyed
/// (open_on_exit), so a failing test cannot hang.
class gate {
 public:
  void wait() {
    std::unique_lock lock(_mu);
    ++_arrived;
    _cv.notify_all();
    _cv.wait(lock, [&] { return _open; });
  }
  /// True once n waits have begun (open or not), false after `limit`.
  bool wait_for_waiters(int n, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    std::unique_lock lock(_mu);
    return _cv.wait_for(lock, limit, [&] { return _arrived >= n; });
  }
  void open() {
    {
      std::lock_guard lock(_mu);
      _open = true;
    }
    _cv.notify_all();
  }

 private:
  std::mutex _mu;
  std::condition_variable _cv;
  int _arrived = 0;
  bool _open = false;
};

/// Declared after what joins the gate's waiters: opens the gate first on every way out.
struct open_on_exit {
  gate& g;
  ~open_on_exit() { g.open(); }
};

inline std::span<const std::byte> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

/// A blocking TCP socket to 127.0.0.1 with a receive timeout, closed on destruction. `source`
/// binds the local end first: any 127.x.y.z is loopback, so tests can play distinct hosts.
class raw_socket {
 public:
  explicit raw_socket(std::uint16_t port, int rcvbuf = 0,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000),
                      const char* source = nullptr);
  ~raw_socket() { if (_fd >= 0) ::close(_fd); }
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;

  int fd() const { return _fd; }
  bool send_all(std::span<const std::byte> data);
  /// Sends one encoded frame.
  bool send_frame(const detail::frame_view& f);
  /// Reads exactly n bytes; empty optional on EOF, error or timeout.
  std::optional<std::vector<std::byte>> read_exact(std::size_t n);
  /// Reads one frame, length prefix included, undecoded; empty on EOF, error or timeout.
  std::vector<std::byte> read_raw_frame();
  /// Reads one frame and decodes it into `out` (views point into `storage`).
  bool read_frame(detail::frame_view& out, std::vector<std::byte>& storage);
  /// True if the peer closed (read returns 0) within the timeout.
  bool wait_eof();
  void close() { if (_fd >= 0) { ::close(_fd); _fd = -1; } }

 private:
  int _fd = -1;
};

/// GET `path` over a fresh loopback connection (Connection: close); returns (status, body),
/// status 0 when no whole response head arrived (connection failed, closed early, or the 5 s
/// receive timeout).
std::pair<int, std::string> http_get(std::uint16_t port, const std::string& path);

/// The server end of one connection, scripted by a test that plays a server to a client: it
/// listens on 127.0.0.1 (an ephemeral port), reads request frames and writes whatever the test
/// wants, well-formed or not. Throws std::runtime_error if it cannot listen.
class scripted_server {
 public:
  scripted_server();
  ~scripted_server();
  scripted_server(const scripted_server&) = delete;
  scripted_server& operator=(const scripted_server&) = delete;

  std::uint16_t port() const { return _port; }
  /// Accepts the client's connection; reads on it time out after 5 s.
  void accept();
  /// Reads one request frame: its call id, 0 on EOF, error, timeout or a frame that does not
  /// decode.
  std::uint64_t read_request();
  bool send(std::span<const std::byte> bytes);
  bool send_frame(const detail::frame_view& f);
  /// A Reply frame for call `id` with `payload`.
  bool reply(std::uint64_t id, std::span<const std::byte> payload);

 private:
  bool read_exact(std::byte* p, std::size_t n);
  int _lfd = -1;
  int _fd = -1;
  std::uint16_t _port = 0;
};

/// The bytes of the hex dump in the first ``` block after `heading` in the Markdown file `doc`
/// ("0000: 34 00 ..." lines, as docs/protocol.md shows frames); empty if the heading is missing.
std::vector<std::byte> documented_dump(const char* doc, std::string_view heading);
/// `bytes` in the same layout, 16 a line: a mismatch reads as a diff of two dumps.
std::string hex_dump(std::span<const std::byte> bytes);

inline detail::frame_view request(std::uint64_t id, std::string_view method,
                                  std::string_view payload, std::uint64_t timeout_us = 0) {
  detail::frame_view f;
  f.call_id = id;
  f.kind = wire::Kind::Request;
  f.method = method;
  f.payload = bytes_of(payload);
  f.timeout_us = timeout_us;
  return f;
}

}  // namespace ringrpc::test
