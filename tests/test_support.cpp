#include "test_support.hpp"

#include <arpa/inet.h>
#include <poll.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace ringrpc::test {

raw_socket::raw_socket(std::uint16_t port, int rcvbuf, std::chrono::milliseconds timeout,
                       const char* source) {
  _fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (_fd < 0) throw std::runtime_error("socket");
  if (source != nullptr) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source, &local.sin_addr) != 1 ||
        ::bind(_fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
      ::close(_fd);
      throw std::runtime_error(std::string("cannot bind to ") + source);
    }
  }
  if (rcvbuf > 0) ::setsockopt(_fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  ::setsockopt(_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  // Sends time out too: a test whose server stopped reading must fail, not hang.
  ::setsockopt(_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  ::setsockopt(_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
    int err = errno;
    if (err == EINTR) {
      // An interrupted connect goes on in the background (connect(2)); wait for its outcome.
      // Sockets with a timeout see EINTR even without a signal handler (io_uring teardown).
      pollfd p{_fd, POLLOUT, 0};
      int rc = 0;
      while ((rc = ::poll(&p, 1, timeout.count() > 0 ? static_cast<int>(timeout.count()) : -1)) < 0 &&
             errno == EINTR) {
      }
      socklen_t len = sizeof err;
      err = rc == 1 && ::getsockopt(_fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 ? err : ETIMEDOUT;
    }
    if (err != 0) throw std::runtime_error(std::string("connect: ") + std::strerror(err));
  }
}

bool raw_socket::send_all(std::span<const std::byte> data) {
  while (!data.empty()) {
    const ssize_t n = ::send(_fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data = data.subspan(static_cast<std::size_t>(n));
  }
  return true;
}

bool raw_socket::send_frame(const detail::frame_view& f) {
  detail::frame_encoder enc;
  return send_all(enc.encode(f));
}

std::optional<std::vector<std::byte>> raw_socket::read_exact(std::size_t n) {
  std::vector<std::byte> out(n);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(_fd, out.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    got += static_cast<std::size_t>(r);
  }
  return out;
}

bool raw_socket::read_frame(detail::frame_view& out, std::vector<std::byte>& storage) {
  auto prefix = read_exact(4);
  if (!prefix) {
    std::fprintf(stderr, "read_frame: no length prefix (EOF, error or timeout: %s)\n", std::strerror(errno));
    return false;
  }
  const std::uint32_t len = detail::read_frame_length(prefix->data());
  auto body = read_exact(len);
  if (!body) return false;
  storage = std::move(*prefix);
  storage.insert(storage.end(), body->begin(), body->end());
  const auto outcome = detail::decode_frame(storage, out);
  if (outcome != detail::decode_outcome::ok) {
    std::fprintf(stderr, "read_frame: %zu-byte frame failed to decode (outcome %d)\n", storage.size(),
                 static_cast<int>(outcome));
  }
  return outcome == detail::decode_outcome::ok;
}

bool raw_socket::wait_eof() {
  std::byte b[4096];
  for (;;) {
    const ssize_t r = ::recv(_fd, b, sizeof(b), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return true;
    if (r < 0) return errno == ECONNRESET;
  }
}

}  // namespace ringrpc::test
