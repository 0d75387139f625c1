// The status-page HTTP server: binding, routes, start and stop. The poll loop that serves the
// connections is admin_loop.cpp.

#include "ops/admin_server.hpp"

#include "base/close_fd.hpp"
#include "base/thread_name.hpp"
#include "ops/admin_loop.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace ringrpc::detail {

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

void admin_server::run() { admin_loop(*this).run(); }

}  // namespace ringrpc::detail
