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

#include "base/thread_name.hpp"
#include "uring/cqe_tag.hpp"
#include "server/server_core.hpp"

namespace ringrpc::detail {

namespace {

constexpr unsigned ring_entries = 256;

[[noreturn]] void fail(int err, const std::string& what) {
  throw std::system_error(err, std::system_category(), what);
}

}  // namespace

acceptor::acceptor(server_core& core) : _core(core) {
  const auto& o = core.options();
  const std::string where = o.host + ":" + std::to_string(o.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(o.port);
  if (const int rc = getaddrinfo(o.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    throw std::system_error(EINVAL, std::system_category(),
                            "cannot resolve listen address " + where + ": " + gai_strerror(rc));
  }
  _listen_fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (_listen_fd < 0) {
    const int err = errno;
    freeaddrinfo(res);
    fail(err, "socket for " + where);
  }
  const int one = 1;
  ::setsockopt(_listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(_listen_fd, res->ai_addr, res->ai_addrlen) < 0) {
    const int err = errno;
    freeaddrinfo(res);
    ::close(_listen_fd);
    fail(err, "bind " + where);
  }
  freeaddrinfo(res);
  if (::listen(_listen_fd, o.backlog) < 0) {
    const int err = errno;
    ::close(_listen_fd);
    fail(err, "listen on " + where);
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(_listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET) {
    _port = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  } else {
    _port = ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
}

acceptor::~acceptor() {
  stop_and_join();
  if (_listen_fd >= 0) ::close(_listen_fd);
}

void acceptor::start(const uring_features& features) {
  std::promise<void> ready;
  auto started = ready.get_future();
  _thread = std::thread([this, features, &ready] {
    name_this_thread("rr-accept");
    std::unique_ptr<ring> r;
    try {
      r = std::make_unique<ring>(ring_entries, features);
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
  if (_listen_fd >= 0) {
    ::close(_listen_fd);
    _listen_fd = -1;
  }
}

void acceptor::arm_accept(ring& r) {
  io_uring_sqe* sqe = r.get_sqe();
  io_uring_prep_multishot_accept(sqe, _listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  io_uring_sqe_set_data64(sqe, make_tag(op::accept));
}

void acceptor::run_loop(ring& r) {
  _waker.arm(r);
  arm_accept(r);
  __kernel_timespec backoff{0, 10'000'000};  // after EMFILE and the like
  std::uint64_t accept_errors = 0;
  bool accept_armed = true;
  bool cancelling = false;
  for (;;) {
    // Announce the sleep before checking the flag, so a stop request either is seen here or
    // writes the eventfd that ends the wait.
    _waker.prepare_sleep();
    if (_stop.load(std::memory_order_acquire) && !cancelling) {
      // Reap the accept to its final completion: a socket accepted meanwhile must be closed
      // by us, not leaked with the ring.
      cancelling = true;
      io_uring_sqe* sqe = r.get_sqe();
      io_uring_prep_cancel64(sqe, make_tag(op::accept), 0);
      io_uring_sqe_set_data64(sqe, make_tag(op::cancel));
    }
    if (cancelling && !accept_armed) break;
    const int rc = r.submit_and_wait();
    if (ring::fatal(rc)) {
      std::fprintf(stderr, "ringrpc: acceptor: io_uring_enter failed: %s\n", std::strerror(-rc));
      std::terminate();
    }
    r.for_each_cqe([&](const io_uring_cqe& cqe) {
      switch (tag_op(cqe.user_data)) {
        case op::accept: {
          if (cqe.res >= 0) {
            if (cancelling) ::close(cqe.res); else hand_off(r, cqe.res);
          } else if (cqe.res != -ECANCELED && accept_errors++ % 1000 == 0) {
            std::fprintf(stderr, "ringrpc: accept failed: %s (logged once per 1000)\n",
                         std::strerror(-cqe.res));
          }
          if (!(cqe.flags & IORING_CQE_F_MORE)) accept_armed = false;
          if (!(cqe.flags & IORING_CQE_F_MORE) && !cancelling) {
            // The kernel ends a multishot accept on errors such as running out of file
            // descriptors; wait a little before asking again so we do not spin on it.
            if (cqe.res < 0) {
              io_uring_sqe* sqe = r.get_sqe();
              io_uring_prep_timeout(sqe, &backoff, 0, 0);
              io_uring_sqe_set_data64(sqe, make_tag(op::timeout));
            } else {
              arm_accept(r);
              accept_armed = true;
            }
          }
          break;
        }
        case op::timeout:
          if (!cancelling) {
            arm_accept(r);
            accept_armed = true;
          }
          break;
        case op::handoff_sent:
          // Only failures complete (IOSQE_CQE_SKIP_SUCCESS): the reader never got the socket.
          ::close(static_cast<int>(reinterpret_cast<std::uintptr_t>(tag_ptr<void>(cqe.user_data))));
          break;
        case op::wake: _waker.arm(r); break;
        default: break;
      }
    });
  }
  r.submit();  // hand-offs prepared in the last turn still go out
  // msg_ring completes during submit; a failed hand-off's completion names an fd to close.
  r.for_each_cqe([&](const io_uring_cqe& cqe) {
    if (tag_op(cqe.user_data) == op::handoff_sent) {
      ::close(static_cast<int>(reinterpret_cast<std::uintptr_t>(tag_ptr<void>(cqe.user_data))));
    }
  });
}

void acceptor::hand_off(ring& r, int fd) {
  _accepted.add();
  reader& target = _core.reader_at(_next_reader++ % _core.reader_count());
  io_uring_sqe* sqe = r.get_sqe();
  // The fd rides in the message's result field; the reader's CQE carries it as cqe->res.
  io_uring_prep_msg_ring(sqe, target.ring_fd(), static_cast<unsigned>(fd), make_tag(op::handoff), 0);
  io_uring_sqe_set_data64(
      sqe, make_tag(op::handoff_sent, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd))));
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

}  // namespace ringrpc::detail
