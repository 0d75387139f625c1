#include "server/acceptor.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <future>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>

#include "base/thread_name.hpp"
#include "server/shard_ops.hpp"
#include "uring/cqe_tag.hpp"
#include "uring/ring_turn.hpp"
#include "server/server_core.hpp"

namespace ringrpc::detail {

namespace {

constexpr unsigned acceptor_ring_entries = 256;

[[noreturn]] void acceptor_fail(int err, const std::string& what) {
  throw std::system_error(err, std::system_category(), what);
}

}  // namespace

namespace {

// Binds and listens on host:port; returns the socket and the port it got.
std::pair<int, std::uint16_t> listen_on(const std::string& host, std::uint16_t port_number, int backlog) {
  const std::string where = host + ":" + std::to_string(port_number);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(port_number);
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    throw std::system_error(EINVAL, std::system_category(),
                            "cannot resolve listen address " + where + ": " + gai_strerror(rc));
  }
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    freeaddrinfo(res);
    acceptor_fail(err, "socket for " + where);
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, res->ai_addr, res->ai_addrlen) < 0) {
    const int err = errno;
    freeaddrinfo(res);
    ::close(fd);
    acceptor_fail(err, "bind " + where);
  }
  freeaddrinfo(res);
  if (::listen(fd, backlog) < 0) {
    const int err = errno;
    ::close(fd);
    acceptor_fail(err, "listen on " + where);
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  const std::uint16_t bound = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                                      : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return {fd, bound};
}

}  // namespace

acceptor::acceptor(server_core& core) : _core(core) {
  const auto& o = core.options();
  std::tie(_listeners[0].fd, _listeners[0].port) = listen_on(o.host, o.port, o.backlog);
  if (o.tls) {
    try {
      std::tie(_listeners[1].fd, _listeners[1].port) = listen_on(o.host, o.tls_port, o.backlog);
    } catch (...) {
      close_listeners();
      throw;
    }
  }
}

void acceptor::close_listeners() noexcept {
  for (auto& l : _listeners) {
    if (l.fd >= 0) ::close(l.fd);
    l.fd = -1;
  }
}

acceptor::~acceptor() {
  stop_and_join();
  close_listeners();
}

void acceptor::start(const uring_features& features) {
  std::promise<void> ready;
  auto started = ready.get_future();
  _thread = std::thread([this, features, &ready] {
    name_this_thread("rr-accept");
    std::unique_ptr<ring> r;
    try {
      r = std::make_unique<ring>(acceptor_ring_entries, features);
    } catch (...) {
      ready.set_exception(std::current_exception());
      return;
    }
    ready.set_value();
    run_loop(*r);
  });
  started.get();
}

void acceptor::stop_and_join() {
  _stop.store(true, std::memory_order_release);
  _waker.notify();
  if (_thread.joinable()) _thread.join();
  // Closing the socket after the ring that watched it is gone: the kernel refuses new
  // connections from here on instead of queueing them in a backlog nobody reads.
  close_listeners();
}

// The accept's tag carries the listener's index (0 or 1) where other tags carry a pointer.
void acceptor::arm_accept(ring& r, std::size_t which) {
  io_uring_sqe* sqe = r.get_sqe();
  io_uring_prep_multishot_accept(sqe, _listeners[which].fd, nullptr, nullptr, SOCK_CLOEXEC);
  io_uring_sqe_set_data64(sqe, make_tag(op::accept, reinterpret_cast<void*>(which)));
  _listeners[which].armed = true;
}

void acceptor::run_loop(ring& r) {
  _waker.arm(r);
  for (std::size_t i = 0; i < 2; ++i) {
    if (_listeners[i].fd >= 0) arm_accept(r, i);
  }
  __kernel_timespec backoff{0, 10'000'000};  // after EMFILE and the like
  std::uint64_t accept_errors = 0;
  bool cancelling = false;
  const auto armed = [this] { return _listeners[0].armed || _listeners[1].armed; };
  for (;;) {
    // Announce the sleep before checking the flag, so a stop request either is seen here or
    // writes the eventfd that ends the wait.
    _waker.prepare_sleep();
    if (_stop.load(std::memory_order_acquire) && !cancelling) {
      // Reap the accepts to their final completions: a socket accepted meanwhile must be
      // closed by us, not leaked with the ring.
      cancelling = true;
      for (std::size_t i = 0; i < 2; ++i) {
        if (!_listeners[i].armed) continue;
        io_uring_sqe* sqe = r.get_sqe();
        io_uring_prep_cancel64(sqe, make_tag(op::accept, reinterpret_cast<void*>(i)), 0);
        io_uring_sqe_set_data64(sqe, make_tag(op::cancel));
      }
    }
    if (cancelling && !armed()) break;
    ring_turn(r, turn_wait{}, terminate_on_fatal{"acceptor"}, [&](const io_uring_cqe& cqe) {
      switch (tag_op(cqe.user_data)) {
        case op::accept: {
          const auto which = reinterpret_cast<std::uintptr_t>(tag_ptr<void>(cqe.user_data));
          if (cqe.res >= 0) {
            if (cancelling) ::close(cqe.res); else hand_off(r, cqe.res, which == 1);
          } else if (cqe.res != -ECANCELED && accept_errors++ % 1000 == 0) {
            std::fprintf(stderr, "ringrpc: accept failed: %s (logged once per 1000)\n",
                         std::strerror(-cqe.res));
          }
          if (!(cqe.flags & IORING_CQE_F_MORE)) _listeners[which].armed = false;
          if (!(cqe.flags & IORING_CQE_F_MORE) && !cancelling) {
            // The kernel ends a multishot accept on errors such as running out of file
            // descriptors; wait a little before asking again so we do not spin on it.
            if (cqe.res < 0) {
              io_uring_sqe* sqe = r.get_sqe();
              io_uring_prep_timeout(sqe, &backoff, 0, 0);
              io_uring_sqe_set_data64(sqe, make_tag(op::timeout, reinterpret_cast<void*>(which)));
            } else {
              arm_accept(r, which);
            }
          }
          break;
        }
        case op::timeout:
          if (!cancelling) arm_accept(r, reinterpret_cast<std::uintptr_t>(tag_ptr<void>(cqe.user_data)));
          break;
        case shard_ops::handoff_sent:
          // Only failures complete (IOSQE_CQE_SKIP_SUCCESS): the reader never got the socket.
          ::close(static_cast<int>(reinterpret_cast<std::uintptr_t>(tag_ptr<void>(cqe.user_data))));
          break;
        case op::wake: _waker.arm(r); break;
        default: break;
      }
    });
  }
  // Not a ring_turn: the ring is going away, and a failed last submit is no reason to end the
  // process the way a failed turn does.
  r.submit();  // hand-offs prepared in the last turn still go out
  // msg_ring completes during submit; a failed hand-off's completion names an fd to close.
  r.for_each_cqe([&](const io_uring_cqe& cqe) {
    if (tag_op(cqe.user_data) == shard_ops::handoff_sent) {
      ::close(static_cast<int>(reinterpret_cast<std::uintptr_t>(tag_ptr<void>(cqe.user_data))));
    }
  });
}

void acceptor::hand_off(ring& r, int fd, bool tls) {
  _accepted.add();
  shard& target = _core.shard_at(_next_reader++ % _core.shard_count());
  io_uring_sqe* sqe = r.get_sqe();
  // The fd rides in the message's result field; the reader's CQE carries it as cqe->res.
  io_uring_prep_msg_ring(sqe, target.ring_fd(), static_cast<unsigned>(fd),
                        make_tag(tls ? shard_ops::handoff_tls : shard_ops::handoff), 0);
  io_uring_sqe_set_data64(
      sqe, make_tag(shard_ops::handoff_sent, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd))));
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

}  // namespace ringrpc::detail
