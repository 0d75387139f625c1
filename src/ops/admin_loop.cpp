// The admin server's poll loop: one thread, non-blocking sockets, one request per connection.

#include "ops/admin_loop.hpp"

#include "base/clock.hpp"
#include "base/close_fd.hpp"
#include "log/log.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <string_view>

namespace ringrpc::detail {

namespace {

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

void append_bytes(std::string& to, const std::vector<std::byte>& from) {
  to.append(reinterpret_cast<const char*>(from.data()), from.size());
}

}  // namespace

admin_loop::admin_loop(admin_server& server)
    : _server(server),
      _options(server._options),
      _backoff(server._options.accept_backoff),
      _busy(serialize(plain(503, "too many admin connections"), false, false)) {}

void admin_loop::run() {
  for (;;) {
    const auto now = clock_type::now();
    const bool accepting = now >= _accept_paused_until;
    _fds.clear();
    _fds.push_back({_server._stop_fd, POLLIN, 0});
    // A negative fd is skipped by poll: while accepting is paused the listener, readable all
    // along, must not end every poll at once.
    _fds.push_back({accepting ? _server._listen_fd : -1, POLLIN, 0});
    for (const auto& c : _conns) {
      short events = c.state == connection::phase::writing ? POLLOUT : POLLIN;
      if (c.state == connection::phase::reading && c.written < c.out.size()) events |= POLLOUT;  // TLS handshake
      _fds.push_back({c.fd, events, 0});
    }
    const int rc = ::poll(_fds.data(), _fds.size(), poll_timeout_ms(now, accepting));
    if (rc < 0 && errno != EINTR) break;  // cannot happen with valid arguments; stop serving
    if (_fds[0].revents != 0) break;
    serve_ready();
    expire_late();
    if ((_fds[1].revents & POLLIN) != 0) accept_pending();
  }
  for (auto& c : _conns) close_fd(c.fd);
}

// Until the nearest connection deadline or the end of an accept pause; -1 (none) waits for
// events alone.
int admin_loop::poll_timeout_ms(clock_type::time_point now, bool accepting) const {
  int timeout_ms = -1;
  auto wake_by = [&](clock_type::time_point t) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
    const int ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
    timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
  };
  for (const auto& c : _conns) wake_by(c.deadline);
  if (!accepting) wake_by(_accept_paused_until);
  return timeout_ms;
}

// The connections' pollfds follow the stop eventfd and the listener, in _conns' order.
void admin_loop::serve_ready() {
  for (std::size_t i = 0; i < _conns.size(); ++i) {
    connection& c = _conns[i];
    const short ev = _fds[i + 2].revents;
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
}

void admin_loop::expire_late() {
  const auto now = clock_type::now();
  for (auto& c : _conns) {
    if (c.fd < 0 || now < c.deadline) continue;
    if (c.state != connection::phase::reading) {
      close_fd(c.fd);  // a client that reads nothing, or lingers past its time
      continue;
    }
    const auto limit = c.probe_only ? _options.probe_read_timeout : _options.read_timeout;
    if (c.tls && !c.tls->established()) {
      tls_failed("TLS handshake not finished within " + std::to_string(limit.count()) + " ms");
      close_fd(c.fd);
      continue;
    }
    respond(c, plain(408, "request not received within " + std::to_string(limit.count()) + " ms"), false, false);
    if (c.fd >= 0) write_some(c);
  }
  std::erase_if(_conns, [](const connection& c) { return c.fd < 0; });
}

void admin_loop::accept_pending() {
  for (;;) {
    const int fd = ::accept4(_server._listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue;  // that one died in the queue
      if (e == EAGAIN || e == EWOULDBLOCK) {
        _backoff = _options.accept_backoff;
        return;
      }
      // EMFILE, ENFILE, ENOBUFS, ENOMEM (and anything unforeseen): the pending connection
      // stays queued and the listener readable; wait for fds or memory to come back.
      _server._accept_failures.fetch_add(1, std::memory_order_relaxed);
      _accept_paused_until = clock_type::now() + _backoff;
      _backoff = std::min(_backoff * 2, _options.max_accept_backoff);
      return;
    }
    _backoff = _options.accept_backoff;
    connection c;
    c.fd = fd;
    c.accepted = clock_type::now();
    c.peer = peer_address::of_socket(fd);
    if (admit(c)) _conns.push_back(std::move(c));
  }
}

// Gives a new connection its slot: a regular one while there are any, else a probe-only one
// (making room by the oldest probe if need be), else none — then it is turned away. False when
// the connection was closed here.
bool admin_loop::admit(connection& c) {
  std::size_t regular = 0;
  std::size_t probes = 0;
  for (const auto& o : _conns) (o.probe_only ? probes : regular) += 1;
  if (regular < _options.max_connections) {
    c.deadline = c.accepted + _options.read_timeout;
  } else {
    if (_options.probe_connections == 0) {
      turn_away(c.fd);
      return false;
    }
    if (probes >= _options.probe_connections) evict_oldest_probe();
    c.probe_only = true;
    c.deadline = c.accepted + _options.probe_read_timeout;
  }
  if (!_options.tls) return true;
  try {
    c.tls = _options.tls->new_http_server_session();
  } catch (const std::bad_alloc&) {
    c.tls = nullptr;
  }
  if (c.tls) return true;
  tls_failed("no TLS session could be made");
  close_fd(c.fd);
  return false;
}

// The oldest probe-only connection, preferring one that has still not sent its request over one
// already answered, so that clients that connect and say nothing cannot starve health checks.
void admin_loop::evict_oldest_probe() {
  connection* victim = nullptr;
  for (auto& o : _conns) {
    if (!o.probe_only || o.fd < 0) continue;
    const bool o_reading = o.state == connection::phase::reading;
    const bool v_reading = victim != nullptr && victim->state == connection::phase::reading;
    if (victim == nullptr || (o_reading && !v_reading) || (o_reading == v_reading && o.accepted < victim->accepted)) {
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
  std::erase_if(_conns, [](const connection& x) { return x.fd < 0; });
}

void admin_loop::read_some(connection& c) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      if (c.state != connection::phase::reading) {
        c.discarded += static_cast<std::size_t>(n);
        if (c.discarded > k_linger_max_bytes) close_fd(c.fd);
        if (c.fd < 0) return;
        continue;
      }
      if (!c.tls) {
        take(c, buf, static_cast<std::size_t>(n));
      } else if (!unseal(c, buf, static_cast<std::size_t>(n))) {
        return;
      }
      examine(c);
      if (c.fd < 0) return;
      if (c.peer_closed && c.state == connection::phase::reading) {
        end_with_close_notify(c);
        return;
      }
      if (c.state != connection::phase::reading) return;  // the rest is drained while lingering
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
}

// Keeps what arrived of the request, never more than the limit (plus one, to know it was
// exceeded).
void admin_loop::take(connection& c, const char* data, std::size_t n) {
  const std::size_t room = _options.max_request_bytes + 1 - std::min(c.in.size(), _options.max_request_bytes + 1);
  c.in.append(data, std::min(n, room));
}

// TLS: ciphertext in, the request's plaintext to c.in and handshake records to c.out. False
// when the connection is over (closed here).
bool admin_loop::unseal(connection& c, const char* data, std::size_t n) {
  _tls_plain.clear();
  _tls_out.clear();
  const bool was_established = c.tls->established();
  auto res = record_session::outcome::failed;
  try {
    res = c.tls->receive({reinterpret_cast<const std::byte*>(data), n}, _tls_plain, _tls_out);
  } catch (const std::bad_alloc&) {
    _tls_out.clear();  // the connection fails; nothing half-made is sent
  }
  append_bytes(c.out, _tls_out);
  if (res != record_session::outcome::failed) {
    take(c, reinterpret_cast<const char*>(_tls_plain.data()), _tls_plain.size());
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
}

// The router: looks at what has arrived and, once it is a whole request, answers it with its
// page, or with why not (malformed, unauthorized, no slot, no such page).
void admin_loop::examine(connection& c) {
  http_parse_result parsed = parse_http_request(c.in, _options.max_request_bytes);
  if (parsed.state == http_parse_result::outcome::incomplete) return;
  if (parsed.state == http_parse_result::outcome::rejected) {
    respond(c, plain(parsed.status, std::move(parsed.message)), false, parsed.allow_header);
    return;
  }
  const http_request& req = parsed.request;
  const bool head = req.method == "HEAD";
  const auto it = _server._routes.find(req.path);
  const bool known = it != _server._routes.end();
  const bool probe = known && it->second.kind == route_kind::probe;
  // Unknown paths too: their 404 lists the pages.
  if (refused_by_auth(c, req, head, probe)) return;
  if (known && c.probe_only && !probe) {
    respond(c, plain(503, "too many admin connections; only health probes are answered now"), head, false);
    return;
  }
  if (!known) {
    std::string pages;
    for (const auto& [path, unused] : _server._routes) pages += " " + path;
    respond(c, plain(404, "no page " + req.path + "; pages:" + pages), head, false);
    return;
  }
  respond(c, run_page(it->second.h, req), head, false);
}

// Bearer tokens, when the server wants them (probes never need one). True when the request was
// answered 429 or 401 here.
bool admin_loop::refused_by_auth(connection& c, const http_request& req, bool head, bool probe) {
  if (!_options.accept_token || probe) return false;
  // A presented token is a guess, unless its address has guessed too often (then it is not
  // looked at); no token at all is no guess and costs no budget.
  const std::int64_t now = now_ns();
  if (const std::uint32_t ms = req.has_authorization ? _server._limiter->blocked_ms(c.peer, now) : 0; ms != 0) {
    _server._auth_limited.fetch_add(1, std::memory_order_relaxed);
    http_response r = plain(429, "too many failed authentications from " + c.peer.host() +
                                     "; its bearer tokens are refused unchecked for " + std::to_string(ms) + " ms");
    r.retry_after_s = (ms + 999) / 1000;
    respond(c, r, head, false);
    return true;
  }
  const bool accepted = !req.bearer_token.empty() && _options.accept_token(req.bearer_token);
  if (accepted) return false;
  if (req.has_authorization) _server._limiter->note_failure(c.peer, now);
  _server._unauthorized.fetch_add(1, std::memory_order_relaxed);
  http_response r = plain(401, req.has_authorization ? "the bearer token is not accepted"
                                                     : "this page needs 'Authorization: Bearer TOKEN'");
  // RFC 6750 3: no error code when none was presented, invalid_token for a wrong one.
  r.www_authenticate = req.has_authorization ? "Bearer realm=\"ringrpc-admin\", error=\"invalid_token\""
                                             : "Bearer realm=\"ringrpc-admin\"";
  respond(c, r, head, false);
  return true;
}

http_response admin_loop::run_page(const admin_server::handler& h, const http_request& req) {
  try {
    return h(req);
  } catch (const std::exception& e) {
    return plain(500, std::string("page failed: ") + e.what());
  } catch (...) {
    return plain(500, "page failed");
  }
}

void admin_loop::respond(connection& c, const http_response& r, bool head_only, bool allow_header) {
  std::string text = serialize(r, head_only, allow_header);
  // What is still unsent (TLS: a handshake or ticket record) goes first.
  c.out.erase(0, c.written);
  c.written = 0;
  if (c.tls) {
    // The response, then our close_notify: the client can tell a whole page from a cut one.
    _tls_out.clear();
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    bool sealed = false;
    try {
      sealed = c.tls->seal({p, text.size()}, _tls_out) == record_session::outcome::ok &&
               c.tls->close_notify(_tls_out) != record_session::outcome::failed;
    } catch (const std::bad_alloc&) {
      // The record layer could not grow a buffer: this client goes without its page.
    }
    if (!sealed) {
      close_fd(c.fd);
      return;
    }
    append_bytes(c.out, _tls_out);
  } else {
    c.out += text;
  }
  c.state = connection::phase::writing;
  c.deadline = clock_type::now() + _options.write_timeout;
  c.in.clear();
  c.in.shrink_to_fit();
}

void admin_loop::write_some(connection& c) {
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
}

// Sends what is pending at once, best effort (an alert or a close_notify fits a socket's send
// buffer), and closes.
void admin_loop::end_now(connection& c) {
  if (c.written < c.out.size()) {
    [[maybe_unused]] const auto sent = ::send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
  }
  ::shutdown(c.fd, SHUT_WR);
  close_fd(c.fd);
}

// The client ended the session before a whole request: its close_notify is answered with ours,
// then the connection closed.
void admin_loop::end_with_close_notify(connection& c) {
  _tls_out.clear();
  try {
    if (c.tls->close_notify(_tls_out) == record_session::outcome::ok) append_bytes(c.out, _tls_out);
  } catch (const std::bad_alloc&) {
    // The FIN alone, then.
  }
  end_now(c);
}

// Closes a connection refused or evicted, with a best-effort 503: a fresh socket's send buffer
// takes it without blocking. Over TLS there is no plaintext to send before a handshake: the
// connection is just closed.
void admin_loop::turn_away(int& fd) {
  if (!_options.tls) {
    [[maybe_unused]] const auto n = ::send(fd, _busy.data(), _busy.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
  }
  close_fd(fd);
}

// A TLS connection that ends before its request could be read: counted, and logged at most once
// a second so that a port scanner cannot fill the log.
void admin_loop::tls_failed(const std::string& why) {
  const std::uint64_t n = _server._tls_failures.fetch_add(1, std::memory_order_relaxed) + 1;
  const auto now = clock_type::now();
  if (now - _last_tls_warning < std::chrono::seconds(1)) return;
  _last_tls_warning = now;
  log::warn("admin_tls_failed", {{"msg", why}, {"closed", "the connection"}, {"failures", std::to_string(n)}});
}

}  // namespace ringrpc::detail
