#pragma once
// A thin owner of one io_uring. Every ring has exactly one owning thread, which creates it,
// submits to it and reaps it; other threads reach that thread by msg_ring or a ring_waker.

#include <liburing.h>

#include <cerrno>

#include <chrono>
#include <cstdint>

#include "uring/uring_probe.hpp"

namespace ringrpc::detail {

class ring {
 public:
  /// Creates the ring on the calling thread, which becomes its owner. Throws std::system_error.
  ring(unsigned entries, const uring_features& features);
  ~ring();
  ring(const ring&) = delete;
  ring& operator=(const ring&) = delete;

  /// Never returns null: when the submission queue is full it submits what is queued first.
  io_uring_sqe* get_sqe() noexcept {
    io_uring_sqe* sqe = io_uring_get_sqe(&_ring);
    while (sqe == nullptr) {
      io_uring_submit(&_ring);
      sqe = io_uring_get_sqe(&_ring);
    }
    return sqe;
  }

  /// Submits everything queued and waits for at least `wait_nr` completions (counting those
  /// the submission itself posts), or until `timeout` (negative: no limit). One syscall for
  /// both. Returns -errno on failure, -ETIME on timeout.
  int submit_and_wait(std::chrono::nanoseconds timeout = std::chrono::nanoseconds(-1), unsigned wait_nr = 1) noexcept;

  /// Whether a result of submit() or submit_and_wait() is an error a loop cannot go on after.
  /// Interrupted, timed out, or the kernel short of resources for the moment are not: the
  /// loop simply turns again.
  static bool fatal(int rc) noexcept {
    return rc < 0 && rc != -EINTR && rc != -ETIME && rc != -EAGAIN && rc != -EBUSY;
  }

  /// Submits without waiting, and reaps what has completed meanwhile. With DEFER_TASKRUN the
  /// kernel posts completions only when the owner enters with GETEVENTS, which a plain
  /// io_uring_submit() never does: a loop that stays busy would otherwise see no completion
  /// until it next sleeps (replies that arrived would time out unread).
  int submit() noexcept {
    return _defer_taskrun ? io_uring_submit_and_get_events(&_ring) : io_uring_submit(&_ring);
  }

  /// Calls f(const io_uring_cqe&) for every completion ready now, then marks them all seen
  /// with a single CQ head update. Returns how many there were.
  template <class F>
  unsigned for_each_cqe(F&& f) noexcept {
    unsigned head = 0, n = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(&_ring, head, cqe) {
      f(*cqe);
      ++n;
    }
    if (n != 0) io_uring_cq_advance(&_ring, n);
    return n;
  }

  int fd() const noexcept { return _ring.ring_fd; }
  unsigned cq_entries() const noexcept { return _ring.cq.ring_entries; }
  io_uring* raw() noexcept { return &_ring; }

 private:
  io_uring _ring{};
  bool _defer_taskrun = false;
};

}  // namespace ringrpc::detail
