#pragma once
// Helpers for loopback integration tests: a raw socket that speaks frames byte by byte, so
// tests can send what no well-behaved client would.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wire/frame_codec.hpp"

namespace ringrpc::test {

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
  /// Reads one frame and decodes it into `out` (views point into `storage`).
  bool read_frame(detail::frame_view& out, std::vector<std::byte>& storage);
  /// True if the peer closed (read returns 0) within the timeout.
  bool wait_eof();
  void close() { if (_fd >= 0) { ::close(_fd); _fd = -1; } }

 private:
  int _fd = -1;
};

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
