#include "uring/ring.hpp"

#include <cstring>
#include <string>
#include <system_error>

namespace ringrpc::detail {

ring::ring(unsigned entries, const uring_features& features) {
  io_uring_params p{};
  // A CQ twice the SQ: multishot requests post many completions per submission.
  p.flags = features.setup_flags | IORING_SETUP_CQSIZE;
  p.cq_entries = entries * 4;
  const int rc = io_uring_queue_init_params(entries, &_ring, &p);
  if (rc < 0) {
    throw std::system_error(-rc, std::system_category(),
                            "io_uring_queue_init(" + std::to_string(entries) + " entries)");
  }
  _defer_taskrun = (p.flags & IORING_SETUP_DEFER_TASKRUN) != 0;
  // Every io_uring_enter then names the ring by its registered index, sparing the kernel an fd
  // lookup and reference per turn (5.18). Where it fails the ring works as before; msg_ring
  // from other rings keeps using the real fd (fd()).
  io_uring_register_ring_fd(&_ring);
}

ring::~ring() { io_uring_queue_exit(&_ring); }

int ring::submit_and_wait(std::chrono::nanoseconds timeout, unsigned wait_nr) noexcept {
  if (timeout.count() < 0) return io_uring_submit_and_wait(&_ring, wait_nr);
  __kernel_timespec ts{};
  ts.tv_sec = static_cast<long long>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long long>(timeout.count() % 1'000'000'000);
  io_uring_cqe* cqe = nullptr;
  // Needs IORING_FEAT_EXT_ARG (5.11) to stay one syscall; liburing falls back by itself.
  const int rc = io_uring_submit_and_wait_timeout(&_ring, &cqe, wait_nr, &ts, nullptr);
  return rc < 0 ? rc : 0;
}

}  // namespace ringrpc::detail
