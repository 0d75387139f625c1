// The client side of bench/tls_vs_plaintext.py: one connection, `depth` echo calls kept in
// flight, plaintext or TLS (a ringrpc-tls client session over a blocking socket: the client is
// only the load, what is measured is the server's CPU per call). Or, with --handshakes, new TLS
// connections one after another (connect, handshake, one call, close) for handshakes/s.
// Prints one JSON line: {"calls": N, "seconds": S, "handshakes": H}.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ringrpc/tls.hpp"
#include "wire/frame_codec.hpp"

namespace {

using bytes = std::vector<std::byte>;
using clock_type = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "tls_bench_client: %s\n", what.c_str());
  std::exit(1);
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) die(std::string("connect: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

void send_all(int fd, const bytes& b) {
  for (std::size_t at = 0; at < b.size();) {
    const ssize_t n = ::send(fd, b.data() + at, b.size() - at, MSG_NOSIGNAL);
    if (n <= 0) die(std::string("send: ") + std::strerror(errno));
    at += static_cast<std::size_t>(n);
  }
}

// One connection: plaintext, or TLS through `session`.
struct conn {
  int fd;
  std::unique_ptr<ringrpc::record_session> session;
  bytes in, plain, out, raw = bytes(64 * 1024);

  void handshake() {
    out.clear();
    session->start(out);
    send_all(fd, out);
    while (!session->established()) read_some();
  }
  // Reads once from the socket; plaintext lands in `plain`.
  void read_some() {
    const ssize_t n = ::recv(fd, raw.data(), raw.size(), 0);
    if (n <= 0) die("recv: connection closed");
    if (!session) {
      plain.insert(plain.end(), raw.begin(), raw.begin() + n);
      return;
    }
    out.clear();
    if (session->receive({raw.data(), static_cast<std::size_t>(n)}, plain, out) ==
        ringrpc::record_session::outcome::failed) {
      die("TLS: " + session->error());
    }
    if (!out.empty()) send_all(fd, out);
  }
  void write(const bytes& frames) {
    if (!session) return send_all(fd, frames);
    out.clear();
    session->seal(frames, out);
    send_all(fd, out);
  }
  // Whole frames at the head of `plain`, consumed.
  std::size_t take_replies() {
    std::size_t at = 0, n = 0;
    while (plain.size() - at >= 4) {
      std::uint32_t len;
      std::memcpy(&len, plain.data() + at, 4);
      if (plain.size() - at - 4 < len) break;
      at += 4 + len;
      ++n;
    }
    plain.erase(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(at));
    return n;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int port = 0, depth = 1;
  double seconds = 2;
  bool tls = false, handshakes = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--port") port = std::stoi(next());
    else if (a == "--depth") depth = std::stoi(next());
    else if (a == "--seconds") seconds = std::stod(next());
    else if (a == "--tls") tls = true;
    else if (a == "--handshakes") handshakes = tls = true;
    else die("unknown argument " + a);
  }
  std::shared_ptr<ringrpc::tls_context> ctx;
  if (tls) ctx = ringrpc::tls_context::client({.insecure = true});

  ringrpc::detail::frame_encoder enc;
  const bytes payload(64, std::byte{'x'});
  bytes frame;
  ringrpc::detail::frame_view f;
  f.method = "echo";
  f.payload = payload;
  auto request = [&](std::uint64_t id, bytes& into) {
    f.call_id = id;
    enc.encode_into(f, frame);
    into.insert(into.end(), frame.begin(), frame.end());
  };

  const auto start = clock_type::now();
  const auto until = start + std::chrono::duration<double>(seconds);
  std::uint64_t calls = 0, shakes = 0, id = 0;
  bytes batch;
  if (handshakes) {
    while (clock_type::now() < until) {
      conn c{connect_to(port), ctx->new_client_session("localhost")};
      c.handshake();
      ++shakes;
      batch.clear();
      request(++id, batch);
      c.write(batch);
      while (c.take_replies() == 0) c.read_some();
      ++calls;
      ::close(c.fd);
    }
  } else {
    conn c{connect_to(port), tls ? ctx->new_client_session("localhost") : nullptr};
    if (tls) c.handshake();
    batch.clear();
    for (int i = 0; i < depth; ++i) request(++id, batch);
    c.write(batch);
    while (clock_type::now() < until) {
      c.read_some();
      const std::size_t done = c.take_replies();
      if (done == 0) continue;
      calls += done;
      batch.clear();
      for (std::size_t i = 0; i < done; ++i) request(++id, batch);
      c.write(batch);  // as many new calls as were answered: the depth stays
    }
    // The calls still in flight are answered before the server is measured again.
    std::uint64_t left = static_cast<std::uint64_t>(depth);
    while (left > 0) {
      c.read_some();
      const std::size_t done = c.take_replies();
      left -= std::min<std::uint64_t>(left, done);
      calls += done;
    }
    ::close(c.fd);
  }
  const double took = std::chrono::duration<double>(clock_type::now() - start).count();
  std::printf("{\"calls\": %llu, \"seconds\": %.3f, \"handshakes\": %llu}\n",
              static_cast<unsigned long long>(calls), took, static_cast<unsigned long long>(shakes));
  return 0;
}
