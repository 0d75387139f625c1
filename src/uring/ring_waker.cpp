#include "uring/ring_waker.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "uring/cqe_tag.hpp"

namespace ringrpc::detail {

ring_waker::ring_waker() : _fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (_fd < 0) throw std::system_error(errno, std::system_category(), "eventfd");
}

ring_waker::~ring_waker() { close(_fd); }

void ring_waker::arm(ring& r) noexcept {
  io_uring_sqe* sqe = r.get_sqe();
  io_uring_prep_read(sqe, _fd, &_sink, sizeof(_sink), 0);
  io_uring_sqe_set_data64(sqe, make_tag(op::wake, this));
}

void ring_waker::signal() noexcept {
  const unsigned long long one = 1;
  // EAGAIN means the counter is already non-zero: the owner will wake anyway.
  [[maybe_unused]] auto rc = write(_fd, &one, sizeof(one));
}

}  // namespace ringrpc::detail
