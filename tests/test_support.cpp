#include "test_support.hpp"

#include <arpa/inet.h>
#include <poll.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
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

namespace {

// Writes all of `data` to the socket `fd` (retrying on EINTR): false on an error or a closed peer.
bool send_all_to(int fd, std::span<const std::byte> data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data = data.subspan(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

bool raw_socket::send_all(std::span<const std::byte> data) { return send_all_to(_fd, data); }

std::pair<int, std::string> http_get(std::uint16_t port, const std::string& path) {
  raw_socket s(port);
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  if (!s.send_all(bytes_of(req))) return {0, {}};
  std::string all;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(s.fd(), buf, sizeof buf, 0);
    // EINTR is not the end of the response. A socket with SO_RCVTIMEO gets it even without a
    // signal handler: closing an io_uring ring this thread created (every server and client
    // start probes with a few) interrupts this thread's blocking recv ~20 ms later.
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    all.append(buf, static_cast<std::size_t>(n));
  }
  const auto sp = all.find(' ');
  const auto body = all.find("\r\n\r\n");
  if (sp == std::string::npos || body == std::string::npos) return {0, all};
  return {std::stoi(all.substr(sp + 1, 3)), all.substr(body + 4)};
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

std::vector<std::byte> raw_socket::read_raw_frame() {
  auto prefix = read_exact(4);
  if (!prefix) {
    std::fprintf(stderr, "read_raw_frame: no length prefix (EOF, error or timeout: %s)\n", std::strerror(errno));
    return {};
  }
  auto body = read_exact(detail::read_frame_length(prefix->data()));
  if (!body) return {};
  std::vector<std::byte> frame = std::move(*prefix);
  frame.insert(frame.end(), body->begin(), body->end());
  return frame;
}

bool raw_socket::read_frame(detail::frame_view& out, std::vector<std::byte>& storage) {
  storage = read_raw_frame();
  if (storage.empty()) return false;
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

std::vector<std::byte> documented_dump(const char* doc, std::string_view heading) {
  std::ifstream in(doc);
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  const auto at = text.find(heading);
  if (at == std::string::npos) return {};
  const auto open = text.find("```\n", at);
  const auto close = text.find("```", open + 4);
  std::istringstream lines(text.substr(open + 4, close - open - 4));
  std::vector<std::byte> out;
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    while (words >> w) out.push_back(static_cast<std::byte>(std::stoul(w, nullptr, 16)));
  }
  return out;
}

std::string hex_dump(std::span<const std::byte> bytes) {
  std::string s;
  char buf[32];
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i % 16 == 0) {
      std::snprintf(buf, sizeof buf, "%s%04zx:", i == 0 ? "" : "\n", i);
      s += buf;
    }
    std::snprintf(buf, sizeof buf, " %02x", static_cast<unsigned>(bytes[i]));
    s += buf;
  }
  return s;
}


scripted_server::scripted_server() {
  _lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (_lfd < 0 || ::bind(_lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(_lfd, 4) != 0) {
    if (_lfd >= 0) ::close(_lfd);
    throw std::runtime_error("scripted_server: bind/listen on 127.0.0.1");
  }
  socklen_t len = sizeof(a);
  ::getsockname(_lfd, reinterpret_cast<sockaddr*>(&a), &len);
  _port = ntohs(a.sin_port);
}

scripted_server::~scripted_server() {
  if (_fd >= 0) ::close(_fd);
  ::close(_lfd);
}

void scripted_server::accept() {
  _fd = ::accept(_lfd, nullptr, nullptr);
  timeval tv{5, 0};
  ::setsockopt(_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

std::uint64_t scripted_server::read_request() {
  std::byte prefix[4];
  if (!read_exact(prefix, 4)) return 0;
  std::vector<std::byte> f(4 + detail::read_frame_length(prefix));
  std::memcpy(f.data(), prefix, 4);
  if (!read_exact(f.data() + 4, f.size() - 4)) return 0;
  detail::frame_view v;
  return detail::decode_frame(f, v) == detail::decode_outcome::ok ? v.call_id : 0;
}

bool scripted_server::send(std::span<const std::byte> b) { return send_all_to(_fd, b); }

bool scripted_server::send_frame(const detail::frame_view& f) {
  detail::frame_encoder enc;
  return send(enc.encode(f));
}

bool scripted_server::reply(std::uint64_t id, std::span<const std::byte> payload) {
  detail::frame_view f;
  f.call_id = id;
  f.kind = wire::Kind::Reply;
  f.payload = payload;
  return send_frame(f);
}

bool scripted_server::read_exact(std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(_fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace ringrpc::test
