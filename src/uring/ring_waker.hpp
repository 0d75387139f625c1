#pragma once
// Wakes a ring thread that may be blocked in io_uring_enter when another thread hands it work.

#include <atomic>

#include "uring/ring.hpp"

namespace ringrpc::detail {

/// The owner keeps a read armed on an eventfd in its ring. Producers call notify() after
/// queueing work; it costs a syscall only when the owner announced it is about to sleep, so a
/// busy owner is never interrupted and a burst of hand-offs costs at most one write.
class ring_waker {
 public:
  ring_waker();  ///< throws std::system_error
  ~ring_waker();
  ring_waker(const ring_waker&) = delete;
  ring_waker& operator=(const ring_waker&) = delete;

  /// Any thread, after publishing work the owner will find.
  void notify() noexcept {
    // Orders the caller's publication (possibly a release store to another variable) before
    // the load of the flag; without it the two may pass each other and the wake-up is lost.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (_sleeping.load(std::memory_order_seq_cst) &&
        _sleeping.exchange(false, std::memory_order_seq_cst)) {
      signal();
    }
  }

  /// Owner: queues the eventfd read on `r`, tagged op::wake. Call at start and after each wake.
  void arm(ring& r) noexcept;

  /// Owner, before it blocks: announce the sleep, then re-check its queues (seq_cst on both
  /// sides makes a producer either see the flag or the owner see the work). If work turned up,
  /// call cancel_sleep() and skip the wait. Call cancel_sleep() too as soon as a wait returns:
  /// until the next prepare_sleep() the owner checks its queues anyway, and a flag left set
  /// would make every producer of the turn write the eventfd for nothing.
  void prepare_sleep() noexcept { _sleeping.store(true, std::memory_order_seq_cst); }
  void cancel_sleep() noexcept { _sleeping.store(false, std::memory_order_relaxed); }
  /// Any thread, a hint: whether the owner announced a sleep and nobody has woken it since.
  bool sleeping() const noexcept { return _sleeping.load(std::memory_order_relaxed); }

  int fd() const noexcept { return _fd; }

 private:
  void signal() noexcept;

  alignas(64) std::atomic<bool> _sleeping{false};
  int _fd = -1;
  unsigned long long _sink = 0;  // destination of the armed read
};

}  // namespace ringrpc::detail
