#include "peer_probe.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <span>

#include "client/tcp_connect.hpp"
#include "peer_sniff.hpp"
#include "wire/frame_codec.hpp"

namespace ringrpc::tools {

namespace {

// What one question got: > 0 that many bytes, 0 the peer hung up (EOF or reset), -1 nothing in
// time.
constexpr ssize_t hung_up = 0;
constexpr ssize_t no_answer = -1;

bool reset(int err) { return err == ECONNRESET || err == EPIPE; }

ssize_t send_all(int fd, std::span<const std::byte> bytes, std::chrono::milliseconds wait) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes = bytes.subspan(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return reset(errno) ? hung_up : no_answer;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return no_answer;
  }
  return 1;
}

ssize_t read_within(int fd, std::span<std::byte> into, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  while ((rc = ::poll(&p, 1, static_cast<int>(wait.count()))) < 0 && errno == EINTR) {
  }
  if (rc <= 0) return no_answer;
  ssize_t n;
  while ((n = ::recv(fd, into.data(), into.size(), 0)) < 0 && errno == EINTR) {
  }
  if (n < 0) return reset(errno) ? hung_up : no_answer;
  return n;
}

}  // namespace

peer_probe probe_peer(const std::string& host, std::uint16_t port, std::chrono::milliseconds budget) {
  peer_probe out;
  const auto half = budget / 2;
  std::array<std::byte, 512> buf{};
  // One question on a connection of its own: what came back within `half`.
  const auto ask = [&](std::span<const std::byte> question) -> ssize_t {
    const int fd = detail::connect_tcp(host, port, half);
    if (fd < 0) return no_answer;
    out.connected = true;
    ssize_t n = send_all(fd, question, half);
    if (n > 0) n = read_within(fd, buf, half);
    ::close(fd);
    return n;
  };
  detail::frame_view ping;
  ping.call_id = 1;
  ping.kind = wire::Kind::Ping;
  detail::frame_encoder encoder;
  ssize_t n = ask(encoder.encode(ping));
  out.asked = "a ringrpc Ping";
  // No answer: a text protocol waiting for a line end, or one that stops at the Ping's NUL
  // bytes (Redis looks for the end of an inline command with strchr). A fresh connection gets a
  // line that Redis answers with +PONG and HTTP servers with a 400.
  if (n == no_answer && out.connected) {
    static constexpr char text[] = "PING\r\n\r\n";
    n = ask(std::as_bytes(std::span(text, sizeof text - 1)));
    out.asked = "\"PING\"";
  }
  if (n == hung_up && out.connected) out.closed = true;
  if (n > 0) {
    const std::span<const std::byte> front(buf.data(), static_cast<std::size_t>(n));
    out.sniffed = std::string(sniff_protocol(front));
    out.front = escape_bytes(front, 48);
  }
  return out;
}

}  // namespace ringrpc::tools
