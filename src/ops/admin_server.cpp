// The status-page HTTP server: one poll(2) loop over non-blocking sockets.

#include "ops/admin_server.hpp"

#include "base/thread_name.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <vector>

namespace ringrpc::detail {

namespace {

using clock_type = std::chrono::steady_clock;

// After the response, the connection lingers this long reading and discarding what the client
// still sends: closing with unread bytes would reset the connection, and a reset may destroy the
// response before the client has read it.
constexpr std::chrono::milliseconds k_linger{1000};
constexpr std::size_t k_linger_max_bytes = 64 * 1024;

std::string_view reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

std::string serialize(const http_response& r, bool head_only, bool allow_header) {
  std::string s = "HTTP/1.1 " + std::to_string(r.status) + " " + std::string(reason(r.status)) + "\r\n";
  s += "Content-Type: " + r.content_type + "\r\n";
  s += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  if (allow_header) s += "Allow: GET, HEAD\r\n";
  s += "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
  if (!head_only) s += r.body;
  return s;
}

http_response plain(int status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  r.body += '\n';
  return r;
}

struct connection {
  enum class phase { reading, writing, lingering };
  int fd = -1;
  bool probe_only = false;  // beyond max_connections: probe routes only, short read timeout
  clock_type::time_point accepted;
  phase state = phase::reading;
  std::string in;
  std::string out;
  std::size_t written = 0;
  std::size_t discarded = 0;
  clock_type::time_point deadline;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

admin_server::admin_server(admin_server_options options) : _options(std::move(options)) {}

admin_server::~admin_server() { stop(); }

void admin_server::route(std::string path, handler h, route_kind kind) {
  if (_started) throw std::logic_error("admin_server: route() after start()");
  _routes.insert_or_assign(std::move(path), route_entry{std::move(h), kind});
}

void admin_server::route(std::string path, std::function<http_response()> h, route_kind kind) {
  route(std::move(path), handler([h = std::move(h)](const http_request&) { return h(); }), kind);
}

std::string admin_server::address() const {
  const bool v6 = _options.host.find(':') != std::string::npos;
  return (v6 ? "[" + _options.host + "]" : _options.host) + ":" + std::to_string(_port);
}

void admin_server::start() {
  if (_started) throw std::logic_error("admin_server: start() twice");
  const std::string where = _options.host + ":" + std::to_string(_options.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(_options.port);
  if (const int rc = getaddrinfo(_options.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "admin server: cannot resolve " + where + ": " + gai_strerror(rc));
  }
  int err = 0;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      _listen_fd = fd;
      break;
    }
    err = errno;
    ::close(fd);
  }
  freeaddrinfo(res);
  if (_listen_fd < 0) {
    throw std::system_error(err, std::system_category(), "admin server: cannot listen on " + where);
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(_listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    _port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  _stop_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (_stop_fd < 0) {
    const int e = errno;
    close_fd(_listen_fd);
    throw std::system_error(e, std::system_category(), "admin server: eventfd");
  }
  _started = true;
  _thread = std::thread([this] {
    name_this_thread("rr-admin");
    run();
  });
}

void admin_server::stop() {
  if (!_thread.joinable()) return;
  const std::uint64_t one = 1;
  // An eventfd write of 1 cannot fail short of a counter overflow, which one stop() never reaches.
  [[maybe_unused]] const auto n = ::write(_stop_fd, &one, sizeof one);
  _thread.join();
  close_fd(_listen_fd);
  close_fd(_stop_fd);
}

void admin_server::run() {
  std::vector<connection> conns;
  std::vector<pollfd> fds;

  auto respond = [&](connection& c, const http_response& r, bool head_only, bool allow_header) {
    c.out = serialize(r, head_only, allow_header);
    c.written = 0;
    c.state = connection::phase::writing;
    c.deadline = clock_type::now() + _options.write_timeout;
    c.in.clear();
    c.in.shrink_to_fit();
  };

  // Looks at what has arrived: nothing to do yet, or a response to send.
  auto examine = [&](connection& c) {
    http_parse_result parsed = parse_http_request(c.in, _options.max_request_bytes);
    if (parsed.state == http_parse_result::outcome::incomplete) return;
    if (parsed.state == http_parse_result::outcome::rejected) {
      respond(c, plain(parsed.status, std::move(parsed.message)), false, parsed.allow_header);
      return;
    }
    const http_request& req = parsed.request;
    const bool head = req.method == "HEAD";
    const auto it = _routes.find(req.path);
    if (it != _routes.end() && c.probe_only && it->second.kind != route_kind::probe) {
      respond(c, plain(503, "too many admin connections; only health probes are answered now"), head, false);
      return;
    }
    if (it == _routes.end()) {
      std::string known;
      for (const auto& [path, unused] : _routes) known += " " + path;
      respond(c, plain(404, "no page " + req.path + "; pages:" + known), head, false);
      return;
    }
    http_response r;
    try {
      r = it->second.h(req);
    } catch (const std::exception& e) {
      r = plain(500, std::string("page failed: ") + e.what());
    } catch (...) {
      r = plain(500, "page failed");
    }
    respond(c, r, head, false);
  };

  auto read_some = [&](connection& c) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (c.state == connection::phase::reading) {
          // Never hold more than the limit (plus one, to know it was exceeded).
          const std::size_t room = _options.max_request_bytes + 1 - std::min(c.in.size(), _options.max_request_bytes + 1);
          c.in.append(buf, std::min(static_cast<std::size_t>(n), room));
          examine(c);
          if (c.state != connection::phase::reading) return;  // the rest is drained while lingering
        } else {
          c.discarded += static_cast<std::size_t>(n);
          if (c.discarded > k_linger_max_bytes) close_fd(c.fd);
          if (c.fd < 0) return;
        }
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0 && errno == EINTR) continue;
      close_fd(c.fd);  // EOF or error: either the client is gone or it sent all it will
      return;
    }
  };

  auto write_some = [&](connection& c) {
    while (c.written < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
      if (n > 0) {
        c.written += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      close_fd(c.fd);
      return;
    }
    ::shutdown(c.fd, SHUT_WR);
    c.out.clear();
    c.out.shrink_to_fit();
    c.state = connection::phase::lingering;
    c.deadline = clock_type::now() + k_linger;
  };

  const std::string busy = serialize(plain(503, "too many admin connections"), false, false);
  // Closes a connection refused or evicted, with a best-effort 503: a fresh socket's send
  // buffer takes it without blocking.
  auto turn_away = [&](int& fd) {
    [[maybe_unused]] const auto n = ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    close_fd(fd);
  };

  clock_type::time_point accept_paused_until{};
  std::chrono::milliseconds backoff = _options.accept_backoff;

  for (;;) {
    const auto now = clock_type::now();
    int timeout_ms = -1;
    auto wake_by = [&](clock_type::time_point t) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
      const int ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    };
    for (const auto& c : conns) wake_by(c.deadline);
    const bool accepting = now >= accept_paused_until;
    if (!accepting) wake_by(accept_paused_until);
    fds.clear();
    fds.push_back({_stop_fd, POLLIN, 0});
    // A negative fd is skipped by poll: while accepting is paused the listener, readable all
    // along, must not end every poll at once.
    fds.push_back({accepting ? _listen_fd : -1, POLLIN, 0});
    for (const auto& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.state == connection::phase::writing ? POLLOUT : POLLIN), 0});
    }
    const int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) break;  // cannot happen with valid arguments; stop serving
    if (fds[0].revents != 0) break;

    // Connections first (their pollfds are in conns' order), then new ones.
    for (std::size_t i = 0; i < conns.size(); ++i) {
      connection& c = conns[i];
      const short ev = fds[i + 2].revents;
      if (ev == 0) continue;
      if (c.state == connection::phase::writing) {
        if ((ev & (POLLOUT | POLLERR | POLLHUP)) != 0) write_some(c);
      } else {
        read_some(c);
        if (c.fd >= 0 && c.state == connection::phase::writing) write_some(c);
      }
    }
    const auto after = clock_type::now();
    for (auto& c : conns) {
      if (c.fd < 0 || after < c.deadline) continue;
      if (c.state == connection::phase::reading) {
        const auto limit = c.probe_only ? _options.probe_read_timeout : _options.read_timeout;
        respond(c, plain(408, "request not received within " + std::to_string(limit.count()) + " ms"),
                false, false);
        write_some(c);
      } else {
        close_fd(c.fd);  // a client that reads nothing, or lingers past its time
      }
    }
    std::erase_if(conns, [](const connection& c) { return c.fd < 0; });

    if ((fds[1].revents & POLLIN) != 0) {
      for (;;) {
        int fd = ::accept4(_listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          const int e = errno;
          if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue;  // that one died in the queue
          if (e == EAGAIN || e == EWOULDBLOCK) {
            backoff = _options.accept_backoff;
            break;
          }
          // EMFILE, ENFILE, ENOBUFS, ENOMEM (and anything unforeseen): the pending connection
          // stays queued and the listener readable; wait for fds or memory to come back.
          _accept_failures.fetch_add(1, std::memory_order_relaxed);
          accept_paused_until = clock_type::now() + backoff;
          backoff = std::min(backoff * 2, _options.max_accept_backoff);
          break;
        }
        backoff = _options.accept_backoff;
        const auto accepted = clock_type::now();
        std::size_t regular = 0;
        std::size_t probes = 0;
        for (const auto& c : conns) (c.probe_only ? probes : regular) += 1;
        connection c;
        c.accepted = accepted;
        if (regular < _options.max_connections) {
          c.deadline = accepted + _options.read_timeout;
        } else {
          if (_options.probe_connections == 0) {
            turn_away(fd);
            continue;
          }
          if (probes >= _options.probe_connections) {
            // Make room by the oldest probe-only connection, preferring one that has still
            // not sent its request over one already answered.
            connection* victim = nullptr;
            for (auto& o : conns) {
              if (!o.probe_only || o.fd < 0) continue;
              const bool o_reading = o.state == connection::phase::reading;
              const bool v_reading = victim != nullptr && victim->state == connection::phase::reading;
              if (victim == nullptr || (o_reading && !v_reading) ||
                  (o_reading == v_reading && o.accepted < victim->accepted)) {
                victim = &o;
              }
            }
            if (victim != nullptr) {
              if (victim->state == connection::phase::reading) {
                turn_away(victim->fd);
              } else {
                close_fd(victim->fd);
              }
            }
            std::erase_if(conns, [](const connection& x) { return x.fd < 0; });
          }
          c.probe_only = true;
          c.deadline = accepted + _options.probe_read_timeout;
        }
        c.fd = fd;
        conns.push_back(std::move(c));
      }
    }
  }
  for (auto& c : conns) close_fd(c.fd);
}

}  // namespace ringrpc::detail
