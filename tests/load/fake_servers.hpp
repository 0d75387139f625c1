#pragma once
// The small servers tests/load/load_engine_test.cpp drives ringrpc-load's engine against, on
// 127.0.0.1 with plain blocking sockets and poll(): a threaded TCP server (one accept thread,
// one per connection) with well-behaved handlers (echo, redis-like, HTTP) and hostile ones
// (garbage, stalls, a close mid-reply, absurd reply sizes), and a ringrpc server. Each stops by
// itself. Header-only: one test includes it.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ringrpc/server.hpp"

namespace ringrpc::load::fakes {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------
// A tiny threaded TCP server: one accept thread, one thread per connection.

class peer {
 public:
  peer(int fd, const std::atomic<bool>& stop) : _fd(fd), _stop(stop) {}

  /// Some bytes appended to `buf`; false on EOF, error or server stop.
  bool read_some(std::string& buf) {
    int rc;
    while ((rc = read_for(buf, 50ms)) == 0) {
    }
    return rc > 0;
  }

  /// 1: bytes appended to `buf`; 0: nothing within `idle`; -1: EOF, error or server stop.
  int read_for(std::string& buf, std::chrono::milliseconds idle) {
    for (;;) {
      if (_stop.load()) return -1;
      pollfd p{_fd, POLLIN, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(idle.count()));
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) return -1;
      if (rc == 0) return 0;
      char tmp[16384];
      const ssize_t n = ::recv(_fd, tmp, sizeof(tmp), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return -1;
      buf.append(tmp, static_cast<std::size_t>(n));
      return 1;
    }
  }

  bool write_all(std::string_view s) {
    while (!s.empty()) {
      if (_stop.load()) return false;
      pollfd p{_fd, POLLOUT, 0};
      const int rc = ::poll(&p, 1, 50);
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) {
        if (rc < 0) return false;
        continue;
      }
      const ssize_t n = ::send(_fd, s.data(), s.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return false;
      s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  /// Reads and discards until the peer goes away or the server stops.
  void drain() {
    std::string sink;
    while (read_some(sink)) sink.clear();
  }

 private:
  int _fd;
  const std::atomic<bool>& _stop;
};

class tcp_server {
 public:
  using handler = std::function<void(peer&)>;

  explicit tcp_server(handler h, std::chrono::seconds lifetime = 60s) : _handler(std::move(h)) {
    _listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (_listen_fd < 0) throw std::runtime_error("socket");
    const int one = 1;
    ::setsockopt(_listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(_listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 || ::listen(_listen_fd, 128) < 0) {
      throw std::runtime_error(std::string("bind/listen: ") + std::strerror(errno));
    }
    socklen_t len = sizeof(addr);
    ::getsockname(_listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    _port = ntohs(addr.sin_port);
    const auto deadline = steady::now() + lifetime;
    _acceptor = std::thread([this, deadline] { accept_loop(deadline); });
  }

  ~tcp_server() { stop(); }
  tcp_server(const tcp_server&) = delete;
  tcp_server& operator=(const tcp_server&) = delete;

  std::uint16_t port() const noexcept { return _port; }
  unsigned accepted() const noexcept { return _accepted.load(); }

  void stop() {
    _stop.store(true);
    if (_acceptor.joinable()) _acceptor.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(_mutex);
      threads.swap(_threads);
    }
    for (auto& t : threads) t.join();
    if (_listen_fd >= 0) ::close(_listen_fd), _listen_fd = -1;
  }

 private:
  void accept_loop(steady::time_point deadline) {
    while (!_stop.load()) {
      if (steady::now() >= deadline) {
        _stop.store(true);  // bounded in time whatever the test does
        break;
      }
      pollfd lp{_listen_fd, POLLIN, 0};
      if (::poll(&lp, 1, 50) <= 0) continue;
      const int fd = ::accept4(_listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      _accepted.fetch_add(1);
      std::lock_guard lock(_mutex);
      _threads.emplace_back([this, fd] {
        peer p(fd, _stop);
        try {
          _handler(p);
        } catch (...) {
        }
        ::close(fd);
      });
    }
  }

  handler _handler;
  int _listen_fd = -1;
  std::uint16_t _port = 0;
  std::atomic<bool> _stop{false};
  std::atomic<unsigned> _accepted{0};
  std::mutex _mutex;
  std::vector<std::thread> _threads;
  std::thread _acceptor;
};

// ---- well-behaved servers ----

inline void echo_server(peer& p) {
  std::string buf;
  while (p.read_some(buf)) {
    if (!p.write_all(buf)) return;
    buf.clear();
  }
}

// Echoes everything but the last byte received, which goes out with the next batch (or after
// 20 ms without input): legal TCP segmentation that leaves every read of the client one byte
// short of a whole reply.
inline void lagging_echo_server(peer& p) {
  std::string buf;
  for (;;) {
    const int rc = p.read_for(buf, 20ms);
    if (rc < 0) return;
    const std::size_t n = rc == 0 ? buf.size() : buf.size() - 1;
    if (n > 0) {
      if (!p.write_all(std::string_view(buf).substr(0, n))) return;
      buf.erase(0, n);
    }
  }
}

// Parses one RESP array of bulk strings from the front of `buf`: its byte length, 0 if
// incomplete, npos if malformed.
inline std::size_t resp_command_length(std::string_view buf) {
  std::size_t pos = 0;
  auto line = [&](std::string_view& out) -> int {  // 1 ok, 0 incomplete, -1 bad
    const auto crlf = buf.find("\r\n", pos);
    if (crlf == std::string_view::npos) return buf.size() - pos > 1024 ? -1 : 0;
    out = buf.substr(pos, crlf - pos);
    pos = crlf + 2;
    return 1;
  };
  auto number = [](std::string_view s) -> long {
    if (s.empty() || s.size() > 9) return -1;
    long v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return -1;
      v = v * 10 + (c - '0');
    }
    return v;
  };
  std::string_view l;
  if (int rc = line(l); rc <= 0) return rc == 0 ? 0 : std::string_view::npos;
  if (l.empty() || l[0] != '*') return std::string_view::npos;
  const long n = number(l.substr(1));
  if (n < 1) return std::string_view::npos;
  for (long i = 0; i < n; ++i) {
    if (int rc = line(l); rc <= 0) return rc == 0 ? 0 : std::string_view::npos;
    if (l.empty() || l[0] != '$') return std::string_view::npos;
    const long len = number(l.substr(1));
    if (len < 0) return std::string_view::npos;
    if (buf.size() < pos + static_cast<std::size_t>(len) + 2) return 0;
    pos += static_cast<std::size_t>(len) + 2;
  }
  return pos;
}

// Answers `answer` to every command (PING or anything else), pipelined commands included.
inline tcp_server::handler redis_server(std::string answer) {
  return [answer](peer& p) {
    std::string buf;
    while (p.read_some(buf)) {
      std::string out;
      for (;;) {
        const auto n = resp_command_length(buf);
        if (n == std::string_view::npos) return;
        if (n == 0) break;
        buf.erase(0, n);
        out += answer;
      }
      if (!out.empty() && !p.write_all(out)) return;
    }
  };
}

// Answers `response` to every request, pipelined requests included (bodies by Content-Length).
inline tcp_server::handler http_server(std::string response) {
  return [response](peer& p) {
    std::string buf;
    while (p.read_some(buf)) {
      std::string out;
      for (;;) {
        const auto end = buf.find("\r\n\r\n");
        if (end == std::string::npos) break;
        std::size_t body = 0;
        std::string head = buf.substr(0, end);
        std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
        if (const auto cl = head.find("\r\ncontent-length:"); cl != std::string::npos) {
          body = std::stoul(head.substr(cl + 17));
        }
        if (buf.size() < end + 4 + body) break;
        buf.erase(0, end + 4 + body);
        out += response;
      }
      if (!out.empty() && !p.write_all(out)) return;
    }
  };
}

// ---- hostile servers ----

// Every read is answered with `junk`.
inline tcp_server::handler garbage_server(std::string junk) {
  return [junk](peer& p) {
    std::string buf;
    while (p.read_some(buf)) {
      buf.clear();
      if (!p.write_all(junk)) return;
    }
  };
}

// Reads everything, never answers.
inline void stall_server(peer& p) { p.drain(); }

// Waits for a request, sends the first part of a reply, closes.
inline tcp_server::handler close_mid_reply_server(std::string partial) {
  return [partial](peer& p) {
    std::string buf;
    if (!p.read_some(buf)) return;
    p.write_all(partial);
  };
}

// Sends `claim` (a reply header claiming a huge body) once, then reads and never answers more.
inline tcp_server::handler oversized_claim_server(std::string claim) {
  return [claim](peer& p) {
    std::string buf;
    if (!p.read_some(buf)) return;
    if (!p.write_all(claim)) return;
    p.drain();
  };
}

inline const std::string http_ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
inline const std::string http_503 = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy";

// ---- ringrpc ----

inline std::unique_ptr<server> start_ringrpc(unsigned handlers) {
  server_options o;
  o.readers = 1;
  o.handlers = handlers;
  o.drain_timeout = 1000ms;
  auto s = std::make_unique<server>(o);
  add_builtin_methods(*s);
  // Sleeps a pseudo-random 0-2 ms, so replies on a connection come back out of send order.
  s->add_method("jitter", [](call_context& ctx) {
    thread_local std::mt19937 rng(static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2001));
    ctx.reply(ctx.payload());
  });
  s->start();
  return s;
}

}  // namespace ringrpc::load::fakes
