#include "client/tcp_connect.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace ringrpc::detail {

namespace {

// 0 once connected, else the errno of the attempt.
int finish_connect(int fd, const addrinfo& ai, std::chrono::nanoseconds timeout) noexcept {
  if (::connect(fd, ai.ai_addr, ai.ai_addrlen) == 0) return 0;
  int err = errno;
  if (err != EINPROGRESS) return err;
  pollfd p{fd, POLLOUT, 0};
  const int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
  int n = 0;
  do {
    n = ::poll(&p, 1, ms);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return ETIMEDOUT;
  if (n < 0) return errno;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return errno;
  return err;
}

}  // namespace

int connect_tcp(const std::string& host, std::uint16_t port, std::chrono::nanoseconds timeout) noexcept {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return -EHOSTUNREACH;
  int err = ECONNREFUSED;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      err = errno;
      continue;
    }
    err = finish_connect(fd, *ai, timeout);
    if (err == 0) {
      freeaddrinfo(res);
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return -err;
}

}  // namespace ringrpc::detail
