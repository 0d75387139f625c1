// The status-page HTTP server: one poll(2) loop over non-blocking sockets.

#include "ops/admin_server.hpp"

#include "base/clock.hpp"
#include "base/thread_name.hpp"
#include "log/log.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
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
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 429: return "Too Many Requests";
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
  if (!r.www_authenticate.empty()) s += "WWW-Authenticate: " + r.www_authenticate + "\r\n";
  if (r.retry_after_s != 0) s += "Retry-After: " + std::to_string(r.retry_after_s) + "\r\n";
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
  std::unique_ptr<record_session> tls;  // HTTPS: every byte in and out goes through it
  bool peer_closed = false;             // TLS: the client's close_notify has arrived
  bool probe_only = false;  // beyond max_connections: probe routes only, short read timeout
  clock_type::time_point accepted;
  peer_address peer;  // for the failed-token budget
  phase state = phase::reading;
  std::string in;   // the request as received (plaintext)
  std::string out;  // bytes for the socket: the response, or (TLS) handshake records too
  std::size_t written = 0;
  std::size_t discarded = 0;
  clock_type::time_point deadline;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void append_bytes(std::string& to, const std::vector<std::byte>& from) {
  to.append(reinterpret_cast<const char*>(from.data()), from.size());
}

}  // namespace

admin_server::admin_server(admin_server_options options) : _options(std::move(options)) {
  if (_options.accept_token) _limiter = std::make_unique<auth_limiter>(_options.auth_failures, "admin");
}

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

  std::vector<std::byte> tls_plain;
  std::vector<std::byte> tls_out;
  clock_type::time_point last_tls_warning{};

  // A TLS connection that ends before its request could be read: counted, and logged at most
  // once a second so that a port scanner cannot fill the log.
  auto tls_failed = [&](const std::string& why) {
    const std::uint64_t n = _tls_failures.fetch_add(1, std::memory_order_relaxed) + 1;
    const auto now = clock_type::now();
    if (now - last_tls_warning < std::chrono::seconds(1)) return;
    last_tls_warning = now;
    log::warn("admin_tls_failed", {{"msg", why}, {"closed", "the connection"}, {"failures", std::to_string(n)}});
  };

  auto respond = [&](connection& c, const http_response& r, bool head_only, bool allow_header) {
    std::string text = serialize(r, head_only, allow_header);
    // What is still unsent (TLS: a handshake or ticket record) goes first.
    c.out.erase(0, c.written);
    c.written = 0;
    if (c.tls) {
      // The response, then our close_notify: the client can tell a whole page from a cut one.
      tls_out.clear();
      const auto* p = reinterpret_cast<const std::byte*>(text.data());
      bool sealed = false;
      try {
        sealed = c.tls->seal({p, text.size()}, tls_out) == record_session::outcome::ok &&
                 c.tls->close_notify(tls_out) != record_session::outcome::failed;
      } catch (const std::bad_alloc&) {
        // The record layer could not grow a buffer: this client goes without its page.
      }
      if (!sealed) {
        close_fd(c.fd);
        return;
      }
      append_bytes(c.out, tls_out);
    } else {
      c.out += text;
    }
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
    const bool probe = it != _routes.end() && it->second.kind == route_kind::probe;
    bool unauthorized = false;
    // Unknown paths too: their 404 lists the pages.
    if (_options.accept_token && !probe) {
      // A presented token is a guess, unless its address has guessed too often (then it is
      // not looked at); no token at all is no guess and costs no budget.
      const std::int64_t now = now_ns();
      if (const std::uint32_t ms = req.has_authorization ? _limiter->blocked_ms(c.peer, now) : 0; ms != 0) {
        _auth_limited.fetch_add(1, std::memory_order_relaxed);
        http_response r = plain(429, "too many failed authentications from " + c.peer.host() +
                                         "; its bearer tokens are refused unchecked for " + std::to_string(ms) + " ms");
        r.retry_after_s = (ms + 999) / 1000;
        respond(c, r, head, false);
        return;
      }
      const bool accepted = !req.bearer_token.empty() && _options.accept_token(req.bearer_token);
      if (!accepted && req.has_authorization) _limiter->note_failure(c.peer, now);
      unauthorized = !accepted;
    }
    if (unauthorized) {
      _unauthorized.fetch_add(1, std::memory_order_relaxed);
      http_response r = plain(401, req.has_authorization ? "the bearer token is not accepted"
                                                         : "this page needs 'Authorization: Bearer TOKEN'");
      // RFC 6750 3: no error code when none was presented, invalid_token for a wrong one.
      r.www_authenticate = req.has_authorization ? "Bearer realm=\"ringrpc-admin\", error=\"invalid_token\""
                                                 : "Bearer realm=\"ringrpc-admin\"";
      respond(c, r, head, false);
      return;
    }
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

  // Keeps what arrived of the request, never more than the limit (plus one, to know it was
  // exceeded).
  auto take = [&](connection& c, const char* data, std::size_t n) {
    const std::size_t room = _options.max_request_bytes + 1 - std::min(c.in.size(), _options.max_request_bytes + 1);
    c.in.append(data, std::min(n, room));
  };

  // Sends what is pending at once, best effort (an alert or a close_notify fits a socket's
  // send buffer), and closes.
  auto end_now = [&](connection& c) {
    if (c.written < c.out.size()) {
      [[maybe_unused]] const auto sent = ::send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
    }
    ::shutdown(c.fd, SHUT_WR);
    close_fd(c.fd);
  };

  // TLS: ciphertext in, the request's plaintext to c.in and handshake records to c.out. False
  // when the connection is over (closed here).
  auto unseal = [&](connection& c, const char* data, std::size_t n) {
    tls_plain.clear();
    tls_out.clear();
    const bool was_established = c.tls->established();
    auto res = record_session::outcome::failed;
    try {
      res = c.tls->receive({reinterpret_cast<const std::byte*>(data), n}, tls_plain, tls_out);
    } catch (const std::bad_alloc&) {
      tls_out.clear();  // the connection fails; nothing half-made is sent
    }
    append_bytes(c.out, tls_out);
    if (res != record_session::outcome::failed) {
      take(c, reinterpret_cast<const char*>(tls_plain.data()), tls_plain.size());
      // A close_notify may follow a whole request: that one is still answered (then ours).
      if (res == record_session::outcome::closed) c.peer_closed = true;
      return true;
    }
    if (!was_established) {
      std::string why = c.tls->error().empty() ? std::string("TLS handshake failed") : c.tls->error();
      // OpenSSL's name for a request line where a ClientHello should be.
      if (why.find("http request") != std::string::npos) why += " (plaintext HTTP sent to the TLS admin port: use https://)";
      tls_failed(why);
    }
    end_now(c);  // with the alert OpenSSL wrote, if any
    return false;
  };

  auto read_some = [&](connection& c) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (c.state == connection::phase::reading) {
          if (!c.tls) {
            take(c, buf, static_cast<std::size_t>(n));
          } else if (!unseal(c, buf, static_cast<std::size_t>(n))) {
            return;
          }
          examine(c);
          if (c.fd < 0) return;
          if (c.peer_closed && c.state == connection::phase::reading) {
            // The client ended the session before a whole request: its close_notify is
            // answered with ours, then the connection closed.
            tls_out.clear();
            try {
              if (c.tls->close_notify(tls_out) == record_session::outcome::ok) append_bytes(c.out, tls_out);
            } catch (const std::bad_alloc&) {
              // The FIN alone, then.
            }
            end_now(c);
            return;
          }
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
      if (c.tls && c.state == connection::phase::reading && !c.tls->established()) {
        tls_failed("the client left during the TLS handshake");
      }
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
    c.out.clear();
    c.written = 0;
    if (c.state == connection::phase::reading) return;  // TLS handshake records sent
    ::shutdown(c.fd, SHUT_WR);
    c.out.shrink_to_fit();
    c.state = connection::phase::lingering;
    c.deadline = clock_type::now() + k_linger;
  };

  const std::string busy = serialize(plain(503, "too many admin connections"), false, false);
  // Closes a connection refused or evicted, with a best-effort 503: a fresh socket's send
  // buffer takes it without blocking.
  // Over TLS there is no plaintext to send before a handshake: the connection is just closed.
  auto turn_away = [&](int& fd) {
    if (!_options.tls) {
      [[maybe_unused]] const auto n = ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
      ::shutdown(fd, SHUT_WR);
    }
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
      short events = c.state == connection::phase::writing ? POLLOUT : POLLIN;
      if (c.state == connection::phase::reading && c.written < c.out.size()) events |= POLLOUT;  // TLS handshake
      fds.push_back({c.fd, events, 0});
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
        if ((ev & POLLOUT) != 0 && c.written < c.out.size()) write_some(c);
        if (c.fd >= 0 && (ev & ~POLLOUT) != 0) read_some(c);
        // A response to send, or (TLS) handshake records that the reads produced.
        if (c.fd >= 0 && c.written < c.out.size()) write_some(c);
      }
    }
    const auto after = clock_type::now();
    for (auto& c : conns) {
      if (c.fd < 0 || after < c.deadline) continue;
      if (c.state == connection::phase::reading) {
        const auto limit = c.probe_only ? _options.probe_read_timeout : _options.read_timeout;
        if (c.tls && !c.tls->established()) {
          tls_failed("TLS handshake not finished within " + std::to_string(limit.count()) + " ms");
          close_fd(c.fd);
          continue;
        }
        respond(c, plain(408, "request not received within " + std::to_string(limit.count()) + " ms"),
                false, false);
        if (c.fd >= 0) write_some(c);
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
        c.peer = peer_address::of_socket(fd);
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
        if (_options.tls) {
          try {
            c.tls = _options.tls->new_http_server_session();
          } catch (const std::bad_alloc&) {
            c.tls = nullptr;
          }
          if (!c.tls) {
            tls_failed("no TLS session could be made");
            close_fd(fd);
            continue;
          }
        }
        c.fd = fd;
        conns.push_back(std::move(c));
      }
    }
  }
  for (auto& c : conns) close_fd(c.fd);
}

}  // namespace ringrpc::detail
